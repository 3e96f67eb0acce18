"""/webhooks routes. Ids are matched with the UUID converter, so these never
shadow the billing app's POST /webhooks/psp; any other non-UUID id gets the same
webhook_not_found as an unknown one."""

from django.urls import path, re_path

from webhooks.api import WebhookMalformedIdView, WebhookViewSet

webhook_list = WebhookViewSet.as_view({"get": "list", "post": "create"})
webhook_detail = WebhookViewSet.as_view(
    {"get": "retrieve", "patch": "partial_update", "delete": "destroy"}
)
webhook_rotate_secret = WebhookViewSet.as_view({"post": "rotate_secret"})
webhook_deliveries = WebhookViewSet.as_view({"get": "deliveries"})

urlpatterns = [
    path("webhooks", webhook_list, name="webhook-list"),
    path("webhooks/<uuid:pk>", webhook_detail, name="webhook-detail"),
    path("webhooks/<uuid:pk>/rotate_secret", webhook_rotate_secret, name="webhook-rotate-secret"),
    path("webhooks/<uuid:pk>/deliveries", webhook_deliveries, name="webhook-deliveries"),
    re_path(
        r"^webhooks/(?!psp$)[^/]+(?:/rotate_secret|/deliveries)?$",
        WebhookMalformedIdView.as_view(),
    ),
]
