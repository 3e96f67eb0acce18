from django.urls import path

from billing import api

urlpatterns = [
    path("billing/subscription", api.SubscriptionView.as_view(), name="billing-subscription"),
    path("billing/usage", api.UsageView.as_view(), name="billing-usage"),
    path("billing/checkout", api.CheckoutView.as_view(), name="billing-checkout"),
    path("billing/portal", api.PortalView.as_view(), name="billing-portal"),
    # Before webhooks.urls in config/urls.py, so it wins over /webhooks/<id>.
    path("webhooks/psp", api.PspWebhookView.as_view(), name="webhooks-psp"),
]
