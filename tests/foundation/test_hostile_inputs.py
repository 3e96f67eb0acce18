"""Inputs that gave a 500 or a stuck job: each now answers with the envelope (4xx)
and changes nothing, and a bad import row is skipped with its reason."""

import io
import json
import re

import pytest

from accounts import ratelimit
from accounts.services import api_key_create
from billing.models import PspEvent
from outreach.models.campaigns import Campaign
from outreach.models.contacts import Contact, ContactImport
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Enrollment
from tests.billing.conftest import WEBHOOK_SECRET, signed_event_post
from tests.conftest import client_for
from tests.foundation.test_errors import assert_envelope
from tests.outreach.factories import CampaignFactory, ContactFactory, CredentialFactory
from tests.webhooks.factories import WebhookFactory

pytestmark = pytest.mark.django_db

RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$")
NUL = "Null characters are not allowed."


def _credential_body(**overrides):
    return {
        "from_email": "sales@example.com",
        "smtp_host": "smtp.example.com",
        "smtp_username": "sales@example.com",
        "smtp_password": "pw",
        **overrides,
    }


# --- relay_provider null -----------------------------------------------------------------


def test_relay_provider_null_is_no_provider_on_create(api_client):
    response = api_client.post(
        "/smtp_credentials", _credential_body(relay_provider=None), format="json"
    )
    assert response.status_code == 201, response.content
    assert response.json()["relay_provider"] is None
    assert SmtpCredential.objects.get().relay_provider == ""


def test_relay_provider_null_clears_it_on_update(api_client, account):
    credential = CredentialFactory(
        account=account, relay_provider="mailgun", relay_signing_key="key-1"
    )
    response = api_client.patch(
        f"/smtp_credentials/{credential.pk}", {"relay_provider": None}, format="json"
    )
    assert response.status_code == 200, response.content
    assert response.json()["relay_provider"] is None
    credential.refresh_from_db()
    assert credential.relay_provider == ""


# --- OPTIONS -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "allow"),
    [
        ("/webhooks", "GET, POST"),
        ("/webhooks/{webhook}", "GET, PATCH, DELETE"),
        ("/webhooks/{webhook}/rotate_secret", "POST"),
        ("/contacts", "GET, POST"),
        ("/campaigns", "GET, POST"),
        ("/api_keys", "GET, POST, HEAD"),
        ("/plans", "GET, HEAD"),
        ("/billing/usage", "GET, HEAD"),
        ("/outreaches", "POST"),
        ("/signup", "POST"),
    ],
)
def test_options_is_method_not_allowed_everywhere(api_client, account, path, allow):
    webhook = WebhookFactory(account=account)
    response = api_client.options(path.format(webhook=webhook.pk))
    assert_envelope(response, 405, "method_not_allowed")
    assert "OPTIONS" not in response["Allow"]
    assert set(allow.split(", ")) <= set(response["Allow"].split(", "))


# --- NUL characters ----------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/contacts?email=a%00b", "/contacts?bounced=tr%00ue"])
def test_a_nul_in_a_query_parameter_is_validation_failed(api_client, path):
    body = assert_envelope(api_client.get(path), 422, "validation_failed")
    (field,) = body["details"]["fields"]
    assert body["details"]["fields"][field] == [NUL]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"email": "a@example.org", "fields": {"plan": "a\x00b"}}, "fields.plan"),
        ({"email": "a@example.org", "fields": {"pl\x00an": "x"}}, "fields.pl\\u0000an"),
        ({"email": "a@example.org", "first_name": "A\x00"}, "first_name"),
    ],
)
def test_a_nul_in_a_contact_is_validation_failed(api_client, body, field):
    response = api_client.post("/contacts", body, format="json")
    assert assert_envelope(response, 422, "validation_failed")["details"]["fields"] == {
        field: [NUL]
    }
    assert not Contact.objects.exists()


def test_a_nul_in_a_contact_update_changes_nothing(api_client, account):
    contact = ContactFactory(account=account, fields={"plan": "pro"})
    response = api_client.patch(
        f"/contacts/{contact.pk}", {"fields": {"plan": "\x00"}}, format="json"
    )
    assert_envelope(response, 422, "validation_failed")
    contact.refresh_from_db()
    assert contact.fields == {"plan": "pro"}


def test_a_nul_in_an_outreach_is_validation_failed(api_client, account):
    campaign = CampaignFactory(account=account)
    response = api_client.post(
        "/outreaches",
        {"campaign_id": str(campaign.pk), "contact": {"email": "a@x.org", "fields": {"k": "\x00"}}},
        format="json",
    )
    body = assert_envelope(response, 422, "validation_failed")
    assert body["details"]["fields"] == {"contact.fields.k": [NUL]}
    assert not Contact.objects.exists()
    assert not Enrollment.objects.exists()


def test_an_import_skips_a_row_with_a_nul_and_finishes(
    api_client, account, django_capture_on_commit_callbacks
):
    campaign = CampaignFactory(account=account)
    rows = [
        {"email": "ok1@example.org"},
        {"email": "bad@example.org", "fields": {"plan": "a\x00b"}},
        {"email": "bad\x00@example.org"},
        {"email": "named@example.org", "first_name": "A\x00"},
        {"email": "ok2@example.org", "company": "Engines"},
    ]
    with django_capture_on_commit_callbacks(execute=True):
        response = api_client.post(
            "/contact_imports", {"contacts": rows, "campaign_id": str(campaign.pk)}, format="json"
        )
    assert response.status_code == 201, response.content

    result = api_client.get(f"/contact_imports/{response.json()['id']}").json()
    assert result["status"] == "completed"
    assert (result["created_count"], result["skipped_count"]) == (2, 3)
    assert [(e["row"], e["message"]) for e in result["errors"]] == [
        (1, "fields: Field 'plan' holds a null character."),
        (2, result["errors"][1]["message"]),
        (3, "first_name: Null characters are not allowed."),
    ]
    assert result["errors"][1]["message"].startswith("email: ")
    assert "\x00" not in json.dumps(result["errors"], ensure_ascii=False)
    assert sorted(Contact.objects.values_list("email", flat=True)) == [
        "ok1@example.org",
        "ok2@example.org",
    ]
    assert Enrollment.objects.filter(campaign=campaign).count() == 2


# --- deep JSON ---------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [65, 10_000])
def test_deeply_nested_json_is_invalid_json(api_client, depth):
    body = '{"email": "a@x.org", "fields": ' + "[" * depth + "]" * depth + "}"
    response = api_client.post("/contacts", body, content_type="application/json")
    assert_envelope(response, 400, "invalid_json")
    assert not Contact.objects.exists()


def test_64_levels_are_still_json(api_client):
    body = '{"email": "a@x.org", "fields": ' + "[" * 63 + "]" * 63 + "}"
    response = api_client.post("/contacts", body, content_type="application/json")
    # Parsed; then refused by the field, as any list would be.
    assert assert_envelope(response, 422, "validation_failed")["details"]["fields"] == {
        "fields": ["Must be an object of string values."]
    }


def test_a_deep_signed_provider_event_is_invalid_json(anon_client, settings):
    settings.STRIPE_WEBHOOK_SECRET = WEBHOOK_SECRET
    deep = "[" * 10_000 + "]" * 10_000
    import time

    import stripe

    header = stripe.WebhookSignature.generate_signature_header(
        deep, WEBHOOK_SECRET, timestamp=int(time.time())
    )
    response = anon_client.post(
        "/webhooks/psp", data=deep, content_type="application/json", HTTP_STRIPE_SIGNATURE=header
    )
    assert_envelope(response, 400, "invalid_json")
    assert not PspEvent.objects.exists()


def test_a_signed_provider_event_holding_a_nul_is_invalid_json(anon_client, settings):
    settings.STRIPE_WEBHOOK_SECRET = WEBHOOK_SECRET
    event = {"id": "evt_nul", "type": "customer.subscription.updated", "data": {"x": "a\x00"}}
    response = signed_event_post(anon_client, event)
    assert_envelope(response, 400, "invalid_json")
    assert not PspEvent.objects.exists()


# --- date-times --------------------------------------------------------------------------


def test_a_year_before_1000_is_shown_with_four_digits(api_client, account):
    credential = CredentialFactory(account=account)
    response = api_client.patch(
        f"/smtp_credentials/{credential.pk}",
        {"disabled_at": "0005-01-02T03:04:05Z"},
        format="json",
    )
    assert response.status_code == 200, response.content
    assert RFC3339.match(response.json()["disabled_at"])
    assert RFC3339.match(api_client.get(f"/smtp_credentials/{credential.pk}").json()["disabled_at"])


@pytest.mark.parametrize("path", ["/smtp_credentials/{credential}", "/webhooks/{webhook}"])
def test_a_timestamp_past_year_9999_in_utc_is_validation_failed(api_client, account, path):
    credential = CredentialFactory(account=account)
    webhook = WebhookFactory(account=account)
    value = "9999-12-31T23:30:00-01:00"
    body = {"webhook": {"disabled_at": value}} if "webhooks" in path else {"disabled_at": value}
    response = api_client.patch(
        path.format(credential=credential.pk, webhook=webhook.pk), body, format="json"
    )
    fields = assert_envelope(response, 422, "validation_failed")["details"]["fields"]
    assert list(fields.values()) == [["Datetime value out of range."]]
    credential.refresh_from_db()
    webhook.refresh_from_db()
    assert (credential.disabled_at, webhook.disabled_at) == (None, None)


# --- lists -------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/contacts", "/campaigns", "/contact_imports", "/api_keys"])
def test_an_empty_starting_after_is_validation_failed(api_client, path):
    body = assert_envelope(api_client.get(f"{path}?starting_after="), 422, "validation_failed")
    assert body["details"]["fields"] == {"starting_after": ["No such object in this list."]}


# --- booleans ----------------------------------------------------------------------------


@pytest.mark.parametrize("value", [1, 0, "true", "yes", None])
def test_a_boolean_must_be_a_json_boolean(api_client, value):
    response = api_client.post("/campaigns", {"name": "C", "track_opens": value}, format="json")
    body = assert_envelope(response, 422, "validation_failed")
    assert "track_opens" in body["details"]["fields"]
    assert not Campaign.objects.exists()


def test_dispatch_all_pending_must_be_a_json_boolean(api_client, account):
    campaign = CampaignFactory(account=account)
    response = api_client.post(
        f"/campaigns/{campaign.pk}/dispatch", {"all_pending": 1}, format="json"
    )
    body = assert_envelope(response, 422, "validation_failed")
    assert body["details"]["fields"]["all_pending"] == ["Must be true or false (a JSON boolean)."]


# --- authentication ----------------------------------------------------------------------


def test_an_oversized_authorization_header_gets_the_envelope(anon_client):
    response = anon_client.get("/api_keys", HTTP_AUTHORIZATION="Bearer " + "a" * 9000)
    assert_envelope(response, 401, "invalid_api_key")


def test_failed_authentications_are_throttled_per_client_ip(anon_client, account):
    good = api_key_create(account=account, label="good").plaintext
    for _ in range(ratelimit.AUTH_FAILURE_LIMIT):
        response = anon_client.get("/api_keys", HTTP_AUTHORIZATION="Bearer ak_live_wrong")
        assert_envelope(response, 401, "invalid_api_key")

    over = anon_client.get("/api_keys", HTTP_AUTHORIZATION="Bearer ak_live_wrong")
    body = assert_envelope(over, 429, "rate_limited")
    assert body["details"] == {
        "limit": ratelimit.AUTH_FAILURE_LIMIT,
        "period": ratelimit.AUTH_FAILURE_PERIOD,
    }
    assert 1 <= int(over["Retry-After"]) <= ratelimit.AUTH_FAILURE_PERIOD
    assert over["RateLimit-Policy"] == (
        f'"auth_failure";q={ratelimit.AUTH_FAILURE_LIMIT};w={ratelimit.AUTH_FAILURE_PERIOD}'
    )
    # A valid key from that address is refused the same way until the window ends:
    # a correct guess looks like a wrong one.
    same = client_for(good).get("/api_keys")
    assert_envelope(same, 429, "rate_limited")
    # Another address is not affected.
    elsewhere = client_for(good).get("/api_keys", REMOTE_ADDR="203.0.113.9")
    assert elsewhere.status_code == 200


def test_successful_authentications_are_not_counted(api_client):
    for _ in range(ratelimit.AUTH_FAILURE_LIMIT + 5):
        assert api_client.get("/plans").status_code == 200


def test_a_multipart_upload_with_a_nul_named_file_still_answers(api_client):
    data = {"file": io.BytesIO(b"email\na@example.org\n")}
    data["file"].name = "a\x00b.csv"
    response = api_client.post("/contact_imports", data, format="multipart")
    assert response.status_code in (201, 422)
    if response.status_code == 201:
        assert "\x00" not in ContactImport.objects.get().filename
