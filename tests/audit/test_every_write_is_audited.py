"""Every write operation of the OpenAPI schema, called once with a valid request,
leaves exactly one audit row with its action and resource (docs/audit.md).

OPERATIONS is the table: one entry per write operation of /schema. An operation the
schema has and the table lacks fails the test, so no endpoint is added without saying
what its row is. An entry whose action is None writes no row, and says why.
"""

import pytest
from drf_spectacular.generators import SchemaGenerator

from accounts.models import AuditEvent
from accounts.services import api_key_create
from tests.outreach.factories import (
    CampaignFactory,
    ContactFactory,
    CredentialFactory,
    EnrollmentFactory,
)
from tests.webhooks.factories import WebhookDeliveryFactory, WebhookFactory

pytestmark = pytest.mark.django_db

WRITES = ("post", "put", "patch", "delete")


def _schema_writes() -> set[str]:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    return {
        f"{method.upper()} {path}"
        for path, operations in schema["paths"].items()
        for method in operations
        if method in WRITES
    }


def _simulated_campaign(account):
    from tests.outreach.test_simulator_sending import simulated_campaign

    return simulated_campaign(account=account)


def _reply(account):
    from tests.conversations.factories import ReplyFactory, SentMessageFactory

    enrollment = EnrollmentFactory(campaign=CampaignFactory(account=account))
    return ReplyFactory(message=SentMessageFactory(enrollment=enrollment))


def _campaign_body(account):
    credential = CredentialFactory(account=account)
    return {
        "name": "Launch",
        "credential_ids": [str(credential.pk)],
        "steps": [{"subject": "Hi", "body_text": "Hello", "delay_minutes": 0}],
    }


# name -> a function of the account giving (path, body, action, resource id or "new").
# "new": the id the response gives the created resource.
def _api_key_revoke(account):
    key = api_key_create(account=account, label="spare").api_key
    return f"/api_keys/{key.pk}", None, "api_key.delete", key.pk


def _blocklist_delete(account):
    from outreach.models.blocklist import BlocklistEntry

    entry = BlocklistEntry.objects.create(account=account, value="spam.example", kind="domain")
    return f"/blocklist/{entry.pk}", None, "blocklist_entry.delete", entry.pk


def _campaign(account, tail="", action="campaign.update", body=None):
    campaign = CampaignFactory(account=account)
    return f"/campaigns/{campaign.pk}{tail}", body, action, campaign.pk


def _advance(account):
    campaign = _simulated_campaign(account)
    return f"/campaigns/{campaign.pk}/advance", {"minutes": 60}, "campaign.advance", campaign.pk


def _dispatch(account):
    campaign = CampaignFactory(account=account)
    EnrollmentFactory(campaign=campaign)
    body = {"all_pending": True}
    return f"/campaigns/{campaign.pk}/dispatch", body, "campaign.dispatch", campaign.pk


def _enrollment_stop(account):
    enrollment = EnrollmentFactory(campaign=CampaignFactory(account=account))
    path = f"/campaigns/{enrollment.campaign_id}/enrollments/{enrollment.pk}/stop"
    return path, None, "enrollment.stop", enrollment.pk


def _pause(account):
    from outreach.models.campaigns import Campaign

    campaign = CampaignFactory(account=account, status=Campaign.Status.ACTIVE)
    return f"/campaigns/{campaign.pk}/pause", None, "campaign.pause", campaign.pk


def _resume(account):
    from outreach.models.campaigns import Campaign

    campaign = CampaignFactory(account=account, status=Campaign.Status.PAUSED)
    return f"/campaigns/{campaign.pk}/resume", None, "campaign.resume", campaign.pk


def _contact(account, method_body):
    contact = ContactFactory(account=account)
    return f"/contacts/{contact.pk}", method_body, "contact.update", contact.pk


def _contact_delete(account):
    contact = ContactFactory(account=account)
    return f"/contacts/{contact.pk}", None, "contact.delete", contact.pk


def _reply_update(account):
    reply = _reply(account)
    return f"/replies/{reply.pk}", {"read": True}, "reply.update", reply.pk


def _respond(account):
    reply = _reply(account)
    return f"/replies/{reply.pk}/respond", {"body_text": "Thanks!"}, "reply.respond", reply.pk


def _approval(account, verb, body=None):
    """A drafter's pending dispatch of one contact, decided by the test's admin key."""
    from outreach.approvals.services import approval_request

    drafter = api_key_create(account=account, role="drafter").api_key
    enrollment = EnrollmentFactory(campaign=CampaignFactory(account=account))
    approval = approval_request(
        api_key=drafter,
        action="dispatch",
        campaign_id=enrollment.campaign_id,
        contact_ids=[enrollment.contact_id],
    )
    return f"/approvals/{approval.pk}/{verb}", body, f"approval.{verb}", approval.pk


def _credential(account, tail="", action="smtp_credential.update", body=None):
    credential = CredentialFactory(account=account)
    return f"/smtp_credentials/{credential.pk}{tail}", body, action, credential.pk


def _webhook(account, tail="", action="webhook.update", body=None):
    webhook = WebhookFactory(account=account, url=CLOSED_PORT_URL)
    return f"/webhooks/{webhook.pk}{tail}", body, action, webhook.pk


def _redeliver(account):
    from outreach.events import campaign_paused_emit
    from webhooks.models import DeliveryJob

    webhook = WebhookFactory(account=account, url=CLOSED_PORT_URL)
    campaign_paused_emit(
        campaign=CampaignFactory(account=account), reason="all_credentials_disabled"
    )
    job = DeliveryJob.objects.get()
    DeliveryJob.objects.filter(pk=job.pk).update(state=DeliveryJob.State.FAILED)
    delivery = WebhookDeliveryFactory(webhook=webhook, job=job)
    path = f"/webhooks/{webhook.pk}/deliveries/{delivery.pk}/redeliver"
    return path, None, "webhook.redeliver", webhook.pk


def _inbound(account):
    from tests.outreach.test_simulator_sending import simulator_mailbox

    credential = simulator_mailbox(account)
    raw = "From: ada@example.org\r\nTo: me@acme.example\r\nSubject: Hi\r\n\r\nHello\r\n"
    path = f"/smtp_credentials/{credential.pk}/inbound"
    return path, {"raw": raw}, "smtp_credential.inbound", credential.pk


# A port nothing listens on: an outbound call fails at once, inside the machine.
CLOSED_PORT_URL = "http://127.0.0.1:9/in"


OPERATIONS = {
    "POST /api_keys": lambda a: ("/api_keys", {"label": "ci"}, "api_key.create", "new"),
    "DELETE /api_keys/{id}": _api_key_revoke,
    "POST /blocklist": lambda a: (
        "/blocklist",
        {"entries": ["spam.example"]},
        "blocklist_entry.create",
        "",
    ),
    "DELETE /blocklist/{id}": _blocklist_delete,
    "POST /campaigns": lambda a: ("/campaigns", _campaign_body(a), "campaign.create", "new"),
    "PATCH /campaigns/{id}": lambda a: _campaign(a, body={"name": "Renamed"}),
    "DELETE /campaigns/{id}": lambda a: _campaign(a, action="campaign.delete"),
    "POST /campaigns/{id}/advance": _advance,
    "POST /campaigns/{id}/dispatch": _dispatch,
    # A preview reads what the dispatch would do; it changes nothing.
    "POST /campaigns/{id}/dispatch/preview": lambda a: _campaign(
        a, "/dispatch/preview", None, {"all_pending": True}
    ),
    "POST /campaigns/{id}/enrollments/{enrollment_id}/stop": _enrollment_stop,
    "POST /campaigns/{id}/pause": _pause,
    "POST /campaigns/{id}/resume": _resume,
    # A preview renders the steps it is sent; it changes nothing.
    "POST /campaigns/{id}/steps/preview": lambda a: _campaign(
        a, "/steps/preview", None, {"steps": [{"subject": "Hi", "body_text": "x"}]}
    ),
    "POST /contact_imports": lambda a: (
        "/contact_imports",
        {"contacts": [{"email": "ada@example.org"}]},
        "contact_import.create",
        "new",
    ),
    "POST /contacts": lambda a: (
        "/contacts",
        {"email": "ada@example.org"},
        "contact.create",
        "new",
    ),
    "PATCH /contacts/{id}": lambda a: _contact(a, {"first_name": "Ada"}),
    "DELETE /contacts/{id}": _contact_delete,
    "POST /outreaches": lambda a: (
        "/outreaches",
        {"campaign_id": str(CampaignFactory(account=a).pk), "contact": {"email": "a@b.org"}},
        "outreach.create",
        "new",
    ),
    "POST /approvals/{id}/approve": lambda a: _approval(a, "approve"),
    "POST /approvals/{id}/reject": lambda a: _approval(a, "reject", {"reason": "Not now"}),
    "PATCH /replies/{id}": _reply_update,
    "POST /replies/{reply_id}/respond": _respond,
    # A preview reads what the response would send; it changes nothing.
    "POST /replies/{reply_id}/respond/preview": lambda a: (
        f"/replies/{_reply(a).pk}/respond/preview",
        {"body_text": "Thanks!"},
        None,
        None,
    ),
    "PATCH /sending_defaults": lambda a: (
        "/sending_defaults",
        {"max_per_recipient_domain_per_day": 50},
        "sending_defaults.update",
        a.pk,
    ),
    "PUT /tracking_domain": lambda a: (
        "/tracking_domain",
        {"domain": "track.example.org"},
        "tracking_domain.update",
        a.pk,
    ),
    "POST /signup/verification": lambda a: ("/signup/verification", None, None, None),
    "POST /smtp_credentials": lambda a: (
        "/smtp_credentials",
        {
            "from_email": "sales@example.com",
            "smtp_host": "smtp.example.com",
            "smtp_username": "sales@example.com",
            "smtp_password": "s3cret-smtp",
        },
        "smtp_credential.create",
        "new",
    ),
    "POST /smtp_credentials/oauth": lambda a: (
        "/smtp_credentials/oauth",
        {"provider": "google"},
        "smtp_credential.connect",
        "",
    ),
    "POST /smtp_credentials/{id}/verify": lambda a: _credential(
        a, "/verify", "smtp_credential.verify"
    ),
    "POST /smtp_credentials/{id}/domain_check": lambda a: _credential(
        a, "/domain_check", "smtp_credential.domain_check", {}
    ),
    "POST /smtp_credentials/{id}/inbound": _inbound,
    "POST /webhooks/{id}/test": lambda a: _webhook(
        a, "/test", "webhook.test", {"type": "enrollment.sent"}
    ),
    "POST /smtp_credentials/simulator": lambda a: (
        "/smtp_credentials/simulator",
        {"from_email": "me@acme.example"},
        "smtp_credential.create",
        "new",
    ),
    "PATCH /smtp_credentials/{id}": lambda a: _credential(a, body={"from_name": "Sales"}),
    "DELETE /smtp_credentials/{id}": lambda a: _credential(a, action="smtp_credential.delete"),
    "POST /webhooks": lambda a: (
        "/webhooks",
        {"webhook": {"url": CLOSED_PORT_URL}},
        "webhook.create",
        "new",
    ),
    "PATCH /webhooks/{id}": lambda a: _webhook(
        a, body={"webhook": {"event_filters": ["enrollment.sent"]}}
    ),
    "DELETE /webhooks/{id}": lambda a: _webhook(a, action="webhook.delete"),
    "POST /webhooks/{id}/rotate_secret": lambda a: _webhook(
        a, "/rotate_secret", "webhook.rotate_secret"
    ),
    "POST /webhooks/{id}/deliveries/{delivery_id}/redeliver": _redeliver,
    "POST /webhooks/{id}/replay": lambda a: _webhook(
        a, "/replay", "webhook.replay", {"since": "2026-01-01T00:00:00Z"}
    ),
}


def test_every_write_operation_of_the_schema_is_in_the_table():
    missing = _schema_writes() - set(OPERATIONS) - set(ELSEWHERE)
    assert not missing, f"write operations without their audit entry: {sorted(missing)}"


# Operations asserted in their own tests, named here: signup (no key), checkout (Stripe's
# recorded answers), and the two provider notifications, which no actor of the account
# sends and which write no row (docs/audit.md).
ELSEWHERE = {
    "POST /signup": "tests/audit/test_audit_rows.py::test_signup_is_one_public_row",
    "POST /billing/checkout": "tests/audit/test_audit_rows.py::test_checkout_and_portal",
    "POST /billing/portal": "tests/audit/test_audit_rows.py::test_checkout_and_portal",
    "POST /webhooks/psp": "tests/audit/test_audit_rows.py::test_provider_notifications",
    "POST /inbound/relay/{credential_id}": "tests/audit/test_audit_rows.py::"
    "test_provider_notifications",
}


@pytest.fixture
def outbound_local(settings):
    settings.OUTBOUND_ALLOW_PRIVATE_NETWORKS = True
    settings.GOOGLE_OAUTH_CLIENT_ID = "audit-client"
    settings.GOOGLE_OAUTH_CLIENT_SECRET = "audit-client-secret"
    settings.WEBHOOK_TIMEOUT_SECONDS = 1


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_one_valid_request_leaves_one_row(
    operation, api_client, account, api_key, outbound_local, used_values
):
    path, body, action, resource_id = OPERATIONS[operation](account)
    method = operation.split()[0].lower()
    before = set(AuditEvent.objects.values_list("pk", flat=True))

    response = getattr(api_client, method)(path, body, format="json")
    used_values.add_body(body)
    used_values.add_response(response)

    assert response.status_code < 300, response.content
    rows = list(AuditEvent.objects.exclude(pk__in=before))
    if action is None:
        assert rows == []
        return
    [row] = rows
    assert (row.action, row.account_id) == (action, account.pk)
    assert row.request_id == response["X-Request-Id"]
    assert row.ip == "127.0.0.1"
    assert row.changes == sorted(body or {})
    assert row.resource_type == action.split(".")[0]
    if resource_id == "new":
        assert row.resource_id == response.json()["id"]
    elif resource_id:
        assert row.resource_id == str(resource_id)
    assert (row.actor_type, row.actor_id, row.actor_name, row.actor_client_kind) == (
        "api_key",
        str(api_key.api_key.pk),
        api_key.api_key.prefix,
        "direct",
    )
