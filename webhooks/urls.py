"""/webhooks routes. Ids are matched with the UUID converter, so these never
shadow the billing app's POST /webhooks/psp; any other non-UUID id gets the same
webhook_not_found as an unknown one."""

from django.urls import path, re_path

from webhooks.api import WebhookEventTypesView, WebhookMalformedIdView, WebhookViewSet

webhook_list = WebhookViewSet.as_view({"get": "list", "post": "create"})
webhook_detail = WebhookViewSet.as_view(
    {"get": "retrieve", "patch": "partial_update", "delete": "destroy"}
)
webhook_rotate_secret = WebhookViewSet.as_view({"post": "rotate_secret"})
webhook_deliveries = WebhookViewSet.as_view({"get": "deliveries"})
webhook_test = WebhookViewSet.as_view({"post": "test"})
webhook_replay = WebhookViewSet.as_view({"post": "replay"})
webhook_redeliver = WebhookViewSet.as_view({"post": "redeliver"})
webhook_delivery = WebhookViewSet.as_view({"get": "delivery"})

urlpatterns = [
    path("webhooks", webhook_list, name="webhook-list"),
    path("webhooks/<uuid:pk>", webhook_detail, name="webhook-detail"),
    path("webhooks/<uuid:pk>/rotate_secret", webhook_rotate_secret, name="webhook-rotate-secret"),
    path("webhooks/<uuid:pk>/deliveries", webhook_deliveries, name="webhook-deliveries"),
    path("webhooks/<uuid:pk>/test", webhook_test, name="webhook-test"),
    path("webhooks/<uuid:pk>/replay", webhook_replay, name="webhook-replay"),
    path(
        "webhooks/<uuid:pk>/deliveries/<str:delivery_id>",
        webhook_delivery,
        name="webhook-delivery",
    ),
    path(
        "webhooks/<uuid:pk>/deliveries/<str:delivery_id>/redeliver",
        webhook_redeliver,
        name="webhook-redeliver",
    ),
    path("webhook_event_types", WebhookEventTypesView.as_view(), name="webhook-event-types"),
    re_path(
        r"^webhooks/(?!psp$)[^/]+(?:/rotate_secret|/deliveries|/test|/replay"
        r"|/deliveries/[^/]+|/deliveries/[^/]+/redeliver)?$",
        WebhookMalformedIdView.as_view(),
    ),
]
