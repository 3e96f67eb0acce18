"""Idempotency-Key is honoured on exactly the endpoints docs/accounts.md lists, and
ignored everywhere else (POST /signup among them)."""

import pytest
from django.db.models import Model

from accounts.models import Account, ApiKey
from outreach.models.campaigns import Campaign
from outreach.models.contacts import Contact, ContactImport
from outreach.models.sending import Enrollment
from tests.outreach.factories import CampaignFactory, CredentialFactory, EnrollmentFactory
from tests.webhooks.factories import WebhookFactory
from webhooks.models import Webhook

pytestmark = pytest.mark.django_db


def _api_keys(account):
    return "/api_keys", {"label": "ci"}, ApiKey


def _webhooks(account):
    return "/webhooks", {"webhook": {"url": "https://hooks.example.com/in"}}, Webhook


def _rotate_secret(account):
    webhook = WebhookFactory(account=account)
    return f"/webhooks/{webhook.pk}/rotate_secret", None, None


def _campaigns(account):
    credential = CredentialFactory(account=account)
    body = {
        "name": "Launch",
        "credential_ids": [str(credential.pk)],
        "steps": [{"subject": "Hi {{first_name|there}}", "body_text": "Hello", "delay_minutes": 0}],
    }
    return "/campaigns", body, Campaign


def _contact_imports(account):
    return "/contact_imports", {"contacts": [{"email": "ada@example.org"}]}, ContactImport


def _outreaches(account):
    campaign = CampaignFactory(account=account)
    body = {"campaign_id": str(campaign.pk), "contact": {"email": "ada@example.org"}}
    return "/outreaches", body, Enrollment


def _respond(account):
    from outreach.models.conversations import ReplyResponse
    from tests.conversations.factories import ReplyFactory, SentMessageFactory

    enrollment = EnrollmentFactory(campaign=CampaignFactory(account=account))
    reply = ReplyFactory(message=SentMessageFactory(enrollment=enrollment))
    return f"/replies/{reply.pk}/respond", {"body_text": "Thanks!"}, ReplyResponse


def _advance(account):
    from tests.outreach.test_simulator_sending import simulated_campaign

    campaign = simulated_campaign(account=account)
    return f"/campaigns/{campaign.pk}/advance", {"minutes": 60}, None


def _checkout(account):
    return "/billing/checkout", {"plan_slug": "hobby"}, None


def _portal(account):
    return "/billing/portal", None, None


SECTION_8 = {
    "POST /api_keys": _api_keys,
    "POST /webhooks": _webhooks,
    "POST /webhooks/:id/rotate_secret": _rotate_secret,
    "POST /campaigns": _campaigns,
    "POST /contact_imports": _contact_imports,
    "POST /outreaches": _outreaches,
    "POST /replies/:id/respond": _respond,
    "POST /campaigns/:id/advance": _advance,
    "POST /billing/checkout": _checkout,
    "POST /billing/portal": _portal,
}


def _count(model: type[Model] | None) -> int | None:
    return model.objects.count() if model is not None else None


@pytest.mark.parametrize("endpoint", SECTION_8)
def test_a_replay_answers_the_first_response_without_acting_again(endpoint, api_client, account):
    path, body, model = SECTION_8[endpoint](account)
    headers = {"HTTP_IDEMPOTENCY_KEY": f"key-{endpoint}"}

    first = api_client.post(path, body, format="json", **headers)
    count = _count(model)
    replay = api_client.post(path, body, format="json", **headers)

    assert first.status_code < 500, first.content
    assert "Idempotent-Replay" not in first
    assert replay["Idempotent-Replay"] == "true"
    assert replay.status_code == first.status_code
    assert replay.content == first.content
    assert _count(model) == count


def test_a_replay_of_rotate_secret_keeps_the_secret_it_gave(api_client, account):
    path, _, _ = _rotate_secret(account)
    first = api_client.post(path, HTTP_IDEMPOTENCY_KEY="rotate-1").json()
    again = api_client.post(path, HTTP_IDEMPOTENCY_KEY="rotate-1").json()
    fresh = api_client.post(path, HTTP_IDEMPOTENCY_KEY="rotate-2").json()
    assert again["secret"] == first["secret"]
    assert fresh["secret"] != first["secret"]


def test_signup_ignores_the_header(anon_client):
    key = {"HTTP_IDEMPOTENCY_KEY": "signup-1"}
    first = anon_client.post("/signup", {"email": "one@example.com"}, format="json", **key)
    second = anon_client.post("/signup", {"email": "two@example.com"}, format="json", **key)
    assert (first.status_code, second.status_code) == (201, 201)
    assert "Idempotent-Replay" not in second
    assert Account.objects.filter(email__in=["one@example.com", "two@example.com"]).count() == 2


def test_other_mutations_ignore_the_header(api_client, account):
    webhook = WebhookFactory(account=account)
    key = {"HTTP_IDEMPOTENCY_KEY": "patch-1"}
    first = api_client.patch(
        f"/webhooks/{webhook.pk}",
        {"webhook": {"event_filters": ["enrollment.sent"]}},
        format="json",
        **key,
    )
    second = api_client.patch(
        f"/webhooks/{webhook.pk}",
        {"webhook": {"event_filters": ["enrollment.opened"]}},
        format="json",
        **key,
    )
    assert (first.status_code, second.status_code) == (200, 200)
    assert "Idempotent-Replay" not in second
    assert second.json()["event_filters"] == ["enrollment.opened"]


def test_dispatch_ignores_the_header(api_client, account):
    campaign = CampaignFactory(account=account)
    contact = Contact.objects.create(account=account, email="ada@example.org")
    Enrollment.objects.create(campaign=campaign, contact=contact)
    key = {"HTTP_IDEMPOTENCY_KEY": "dispatch-1"}
    first = api_client.post(
        f"/campaigns/{campaign.pk}/dispatch", {"all_pending": True}, format="json", **key
    )
    Enrollment.objects.create(
        campaign=campaign, contact=Contact.objects.create(account=account, email="bo@example.org")
    )
    second = api_client.post(
        f"/campaigns/{campaign.pk}/dispatch", {"all_pending": True}, format="json", **key
    )
    assert first.json()["dispatched"] == 1
    assert second.json()["dispatched"] == 1
    assert "Idempotent-Replay" not in second
