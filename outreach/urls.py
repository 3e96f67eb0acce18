from django.urls import path, re_path
from rest_framework.routers import SimpleRouter

from outreach.analytics import api as analytics_api
from outreach.approval_decisions import api as approvals_api
from outreach.blocklist import api as blocklist_api
from outreach.campaigns import api as campaigns_api
from outreach.campaigns import clock
from outreach.contacts import api as contacts_api
from outreach.conversations import api as conversations_api
from outreach.conversations import respond_api
from outreach.domain_cap import api as domain_cap_api
from outreach.domains import api as domains_api
from outreach.intake import views
from outreach.intake.inbound_api import InboundMessageView
from outreach.mailboxes import api

router = SimpleRouter(trailing_slash=False)
router.register("smtp_credentials", api.CredentialViewSet, basename="smtp-credential")
router.register("campaigns", campaigns_api.CampaignViewSet, basename="campaign")
router.register("contacts", contacts_api.ContactViewSet, basename="contact")
router.register("contact_imports", contacts_api.ContactImportViewSet, basename="contact-import")
router.register("replies", conversations_api.ReplyViewSet, basename="reply")
router.register("blocklist", blocklist_api.BlocklistViewSet, basename="blocklist")
router.register("approvals", approvals_api.ApprovalViewSet, basename="approval")

urlpatterns = [
    # intake: public endpoints (docs/intake.md)
    path("t/o/<str:token>.gif", views.open_pixel, name="open-pixel"),
    path("t/c/<str:token>", views.click_redirect, name="click-redirect"),
    path("u/<str:token>", views.unsubscribe, name="unsubscribe"),
    path(
        "inbound/relay/<str:credential_id>",
        views.RelayWebhookView.as_view(),
        name="relay-webhook",
    ),
    path("oauth/connect/<str:token>", views.oauth_connect, name="oauth-connect"),
    path("oauth/callback/<str:provider>", views.oauth_callback, name="oauth-callback"),
    path("outreaches", campaigns_api.OutreachView.as_view(), name="outreaches"),
    # The test clock of a simulated campaign (docs/sandbox.md).
    path(
        "campaigns/<str:pk>/advance", clock.CampaignAdvanceView.as_view(), name="campaign-advance"
    ),
    # The thread of an enrollment, under its campaign's path (the router's pattern).
    re_path(
        r"^campaigns/(?P<pk>[^/.]+)/enrollments/(?P<enrollment_id>[^/]+)/thread$",
        conversations_api.ThreadView.as_view(),
        name="campaign-enrollment-thread",
    ),
    path(
        "replies/<str:reply_id>/respond",
        respond_api.ReplyRespondView.as_view(),
        name="reply-respond",
    ),
    path(
        "replies/<str:reply_id>/respond/preview",
        respond_api.ReplyRespondPreviewView.as_view(),
        name="reply-respond-preview",
    ),
    path(
        "smtp_credentials/<str:pk>/domain_check",
        domains_api.DomainCheckView.as_view(),
        name="smtp-credential-domain-check",
    ),
    path(
        "smtp_credentials/<str:pk>/inbound",
        InboundMessageView.as_view(),
        name="smtp-credential-inbound",
    ),
    path("tracking_domain", domains_api.TrackingDomainView.as_view(), name="tracking-domain"),
    path("sending_defaults", domain_cap_api.SendingDefaultsView.as_view(), name="sending-defaults"),
    path("analytics", analytics_api.AnalyticsView.as_view(), name="analytics"),
    path("blocklist.csv", blocklist_api.BlocklistCsvView.as_view(), name="blocklist-csv"),
    *router.urls,
]
