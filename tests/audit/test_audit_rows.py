"""What an audit row holds and when none is written (docs/audit.md): signup, billing,
provider notifications, failed and rolled-back requests, idempotent replays."""

import pytest
from rest_framework.test import APIClient

from accounts.models import AuditEvent
from billing.api import PspWebhookView
from config.api.audit import AuditMixin
from outreach.campaigns import services as campaign_services
from outreach.intake.views import RelayWebhookView
from outreach.models.campaigns import Campaign
from plans.models import Plan
from tests.billing.conftest import recorded, recorded_stripe, signed_event_post, stripe_event
from tests.outreach.factories import CampaignFactory

__all__ = ["recorded_stripe"]  # a fixture, used by name

pytestmark = pytest.mark.django_db


def test_signup_is_one_public_row(anon_client, used_values):
    response = anon_client.post(
        "/signup", {"email": "ada@example.org", "name": "Ada Lovelace"}, format="json"
    )
    assert response.status_code == 201, response.content
    body = response.json()
    used_values.update({"ada@example.org", "Ada Lovelace", body["api_key"]["plaintext"]})
    [row] = AuditEvent.objects.all()
    assert str(row.account_id) == body["account_id"]
    assert (row.action, row.resource_type, row.resource_id) == (
        "account.signup",
        "account",
        body["account_id"],
    )
    assert (row.actor_type, row.actor_id, row.actor_name) == ("public", "", "")
    assert row.changes == ["email", "name"]
    assert row.request_id == response["X-Request-Id"]


def test_checkout_and_portal(api_client, account, recorded_stripe, used_values):
    account.psp_customer_id = "cus_RkX2bQ9mTzL4aP"
    account.save(update_fields=["psp_customer_id"])
    Plan.objects.filter(slug="hobby").update(psp_price_id="price_1QmZwPLgUG5tbmjcHobby001")
    recorded_stripe.answer("POST", "/v1/checkout/sessions", recorded("checkout_session.json"))
    recorded_stripe.answer("POST", "/v1/billing_portal/sessions", recorded("portal_session.json"))

    checkout = api_client.post("/billing/checkout", {"plan_slug": "hobby"}, format="json")
    portal = api_client.post("/billing/portal")

    assert (checkout.status_code, portal.status_code) == (200, 200)
    used_values.update({checkout.json()["url"], portal.json()["url"]})
    rows = AuditEvent.objects.order_by("created_at")
    assert [(r.action, r.resource_type, r.resource_id) for r in rows] == [
        ("billing.checkout", "billing", str(account.pk)),
        ("billing.portal", "billing", str(account.pk)),
    ]


def test_provider_notifications(client, account, recorded_stripe):
    """Stripe's and the relay providers' notifications are no actor's change: no row."""
    event = stripe_event("customer.created", {"id": "cus_x", "object": "customer"})
    response = signed_event_post(client, event)
    assert response.status_code == 200, response.content
    assert not AuditEvent.objects.exists()
    assert PspWebhookView.audit_actions == {"post": None}
    assert not issubclass(RelayWebhookView, AuditMixin)


def test_a_failed_request_leaves_no_row(api_client, other_client, account):
    campaign = CampaignFactory(account=account)
    invalid = api_client.patch(f"/campaigns/{campaign.pk}", {"name": 7}, format="json")
    foreign = other_client.patch(f"/campaigns/{campaign.pk}", {"name": "x"}, format="json")
    unknown = api_client.delete("/campaigns/not-an-id")
    assert (invalid.status_code, foreign.status_code, unknown.status_code) == (422, 404, 404)
    assert not AuditEvent.objects.exists()


def _update_then(error):
    real = campaign_services.campaign_update

    def update_then_fail(*, campaign, data):
        real(campaign=campaign, data=data)
        raise error

    return update_then_fail


@pytest.mark.parametrize("error", [RuntimeError("after the change"), Campaign.DoesNotExist()])
def test_an_error_after_the_change_rolls_back_change_and_row(
    api_client, account, monkeypatch, error
):
    campaign = CampaignFactory(account=account, name="Before")
    monkeypatch.setattr(campaign_services, "campaign_update", _update_then(error))
    api_client.raise_request_exception = False

    response = api_client.patch(f"/campaigns/{campaign.pk}", {"name": "After"}, format="json")

    assert response.status_code >= 400
    campaign.refresh_from_db()
    assert campaign.name == "Before"
    assert not AuditEvent.objects.exists()


def test_an_idempotent_replay_writes_no_row(api_client, used_values):
    key = {"HTTP_IDEMPOTENCY_KEY": "create-key-1"}
    first = api_client.post("/api_keys", {"label": "ci"}, format="json", **key)
    replay = api_client.post("/api_keys", {"label": "ci"}, format="json", **key)
    used_values.add(first.json()["plaintext"])
    assert replay["Idempotent-Replay"] == "true"
    [row] = AuditEvent.objects.all()
    assert (row.action, row.resource_id) == ("api_key.create", first.json()["id"])
    assert row.idempotency_key == "create-key-1"
    assert row.request_id == first["X-Request-Id"]


def test_a_rolled_back_idempotent_request_leaves_no_row(api_client, account, monkeypatch):
    from webhooks import services as webhook_services

    real = webhook_services.webhook_rotate_secret

    def rotate_then_fail(**kwargs):
        real(**kwargs)
        raise RuntimeError("after the change")

    monkeypatch.setattr(webhook_services, "webhook_rotate_secret", rotate_then_fail)
    from tests.webhooks.factories import WebhookFactory

    webhook = WebhookFactory(account=account)
    api_client.raise_request_exception = False
    response = api_client.post(
        f"/webhooks/{webhook.pk}/rotate_secret", HTTP_IDEMPOTENCY_KEY="rotate-1"
    )
    assert response.status_code == 500
    assert not AuditEvent.objects.exists()


def test_the_row_names_the_key_that_asked(account, api_client):
    from accounts.services import api_key_create

    mcp = api_key_create(account=account, label="agent", client_kind="mcp")
    campaign = CampaignFactory(account=account)
    response = APIClient().patch(
        f"/campaigns/{campaign.pk}",
        {"name": "By the agent"},
        format="json",
        HTTP_AUTHORIZATION=f"Bearer {mcp.plaintext}",
        HTTP_X_REQUEST_ID="agent-run-42:step.7",
    )
    assert response.status_code == 200
    [row] = AuditEvent.objects.all()
    assert (row.actor_id, row.actor_name, row.actor_client_kind) == (
        str(mcp.api_key.pk),
        mcp.api_key.prefix,
        "mcp",
    )
    assert row.request_id == "agent-run-42:step.7" == response["X-Request-Id"]
    assert row.changes == ["name"]
