from django.urls import path
from rest_framework.routers import SimpleRouter

from outreach import api, views_public

router = SimpleRouter(trailing_slash=False)
router.register("smtp_credentials", api.CredentialViewSet, basename="smtp-credential")
router.register("campaigns", api.CampaignViewSet, basename="campaign")
router.register("contacts", api.ContactViewSet, basename="contact")
router.register("contact_imports", api.ContactImportViewSet, basename="contact-import")

urlpatterns = [
    # intake: public endpoints (API.md section 4)
    path("t/o/<str:token>.gif", views_public.open_pixel, name="open-pixel"),
    path("u/<str:token>", views_public.unsubscribe, name="unsubscribe"),
    path(
        "inbound/relay/<str:credential_id>",
        views_public.RelayWebhookView.as_view(),
        name="relay-webhook",
    ),
    path("oauth/callback/<str:provider>", views_public.oauth_callback, name="oauth-callback"),
    path("outreaches", api.OutreachView.as_view(), name="outreaches"),
    *router.urls,
]
