from django.urls import path
from rest_framework.routers import SimpleRouter

from outreach import api

router = SimpleRouter(trailing_slash=False)
router.register("smtp_credentials", api.CredentialViewSet, basename="smtp-credential")
router.register("campaigns", api.CampaignViewSet, basename="campaign")
router.register("contacts", api.ContactViewSet, basename="contact")
router.register("contact_imports", api.ContactImportViewSet, basename="contact-import")

urlpatterns = [
    path("outreaches", api.OutreachView.as_view(), name="outreaches"),
    *router.urls,
]
