"""Strict requests (docs/api.md, "Strict requests"): unknown body fields and values of
the wrong JSON type are refused with 422 validation_failed naming the field, on every
endpoint, nested objects included; read-only fields sent back unchanged are accepted;
query parameters are typed as strictly; the OpenAPI schema marks bodies closed."""

import sys

import pytest
from django.urls import get_resolver
from rest_framework import serializers

from config.api.serializers import StrictFieldsMixin
from outreach.models.campaigns import CampaignStep
from outreach.models.contacts import Contact
from tests.outreach.factories import CampaignFactory, ContactFactory, CredentialFactory
from tests.outreach.helpers import assert_error
from tests.webhooks.factories import WebhookFactory

pytestmark = pytest.mark.django_db

APPS = ("accounts.", "billing.", "plans.", "webhooks.", "outreach.", "config.")


def _fields(response) -> dict:
    return assert_error(response, 422, "validation_failed")["details"]["fields"]


def test_every_serializer_of_the_api_is_strict():
    """A serializer that does not stand on the strict base would take unknown fields
    silently: none may exist in the service's modules."""
    assert get_resolver().url_patterns  # every API module imported, whatever ran before
    pending = list(serializers.BaseSerializer.__subclasses__())
    lax = []
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        module = sys.modules.get(cls.__module__)
        if not cls.__module__.startswith(APPS) or module is None:
            continue
        if (
            issubclass(cls, serializers.ListSerializer)
            or cls.__module__ == "config.api.serializers"
        ):
            continue
        if not issubclass(cls, StrictFieldsMixin):
            lax.append(f"{cls.__module__}.{cls.__qualname__}")
    assert lax == []


def test_a_misspelt_step_field_is_refused_not_defaulted(api_client, account):
    mailbox = CredentialFactory(account=account)
    body = {
        "name": "Typo",
        "credential_ids": [str(mailbox.id)],
        "steps": [{"subject": "Hi", "body_text": "Hello", "dealy_minutes": 5}],
    }
    fields = _fields(api_client.post("/campaigns", body, format="json"))
    assert fields == {"steps.0.dealy_minutes": ["Unknown field."]}
    assert not CampaignStep.objects.exists()


def test_an_unknown_contact_field_is_refused(api_client):
    response = api_client.post(
        "/contacts", {"email": "ada@example.org", "firstname": "Ada"}, format="json"
    )
    assert _fields(response) == {"firstname": ["Unknown field."]}
    assert response.json()["message"] == "firstname: Unknown field."
    assert not Contact.objects.exists()


def test_signup_with_a_plan_is_refused(anon_client):
    response = anon_client.post(
        "/signup", {"email": "new@example.org", "plan": "pro"}, format="json"
    )
    assert _fields(response) == {"plan": ["Unknown field."]}


def test_unknown_fields_inside_a_wrapped_body(api_client, account):
    response = api_client.post(
        "/webhooks", {"webhook": {"url": "https://h.example.com", "secret": "x"}}, format="json"
    )
    assert _fields(response)["webhook.secret"] == ["Unknown field."]
    response = api_client.post("/webhooks", {"webhook": {}, "hook": 1}, format="json")
    assert _fields(response)["hook"] == ["Unknown field."]


def test_unknown_fields_and_field_errors_are_reported_together(api_client):
    response = api_client.post("/contacts", {"email": "nope", "firstname": "Ada"}, format="json")
    fields = _fields(response)
    assert fields["firstname"] == ["Unknown field."]
    assert "email" in fields


@pytest.mark.parametrize(
    ("path", "body", "field", "message"),
    [
        ("/contacts", {"email": "a@example.org", "company": 42}, "company", "Must be a string."),
        (
            "/campaigns",
            {"name": "x", "bounce_threshold_percent": "5"},
            "bounce_threshold_percent",
            "Must be a number.",
        ),
        (
            "/campaigns",
            {"name": "x", "track_opens": "true"},
            "track_opens",
            "Must be true or false (a JSON boolean).",
        ),
        ("/campaigns", {"name": 7}, "name", "Must be a string."),
        ("/campaigns", {"name": "x", "credential_ids": "abc"}, "credential_ids", "Must be a list."),
        (
            "/smtp_credentials",
            {"from_email": "a@example.org", "smtp_port": "25"},
            "smtp_port",
            "Must be an integer.",
        ),
        (
            "/smtp_credentials",
            {"from_email": "a@example.org", "daily_limit": True},
            "daily_limit",
            "Must be an integer.",
        ),
    ],
)
def test_values_of_the_wrong_json_type_are_refused(api_client, path, body, field, message):
    assert _fields(api_client.post(path, body, format="json"))[field] == [message]


def test_a_custom_field_value_must_be_a_string(api_client):
    body = {"email": "a@example.org", "fields": {"plan": 3}}
    assert "plan" in _fields(api_client.post("/contacts", body, format="json"))["fields"][0]


def test_a_step_delay_given_as_text_is_refused(api_client):
    body = {"name": "x", "steps": [{"subject": "s", "body_text": "b", "delay_minutes": "5"}]}
    assert _fields(api_client.post("/campaigns", body, format="json")) == {
        "steps.0.delay_minutes": ["Must be an integer."]
    }


def test_an_object_read_can_be_sent_back(api_client, account):
    campaign = CampaignFactory(account=account)
    read = api_client.get(f"/campaigns/{campaign.id}").json()
    response = api_client.patch(
        f"/campaigns/{campaign.id}", read | {"name": "Renamed"}, format="json"
    )
    assert response.status_code == 200, response.content
    assert response.json()["name"] == "Renamed"

    contact = ContactFactory(account=account)
    read = api_client.get(f"/contacts/{contact.id}").json()
    response = api_client.patch(
        f"/contacts/{contact.id}", read | {"company": "Acme"}, format="json"
    )
    assert response.status_code == 200, response.content

    webhook = WebhookFactory(account=account)
    read = api_client.get(f"/webhooks/{webhook.id}").json()
    del read["url"]  # sent back, it would be checked again (its host resolved)
    response = api_client.patch(
        f"/webhooks/{webhook.id}",
        {"webhook": read | {"event_filters": ["campaign.paused"]}},
        format="json",
    )
    assert response.status_code == 200, response.content
    assert response.json()["event_filters"] == ["campaign.paused"]


def test_a_changed_read_only_field_is_refused(api_client, account):
    campaign = CampaignFactory(account=account)
    response = api_client.patch(f"/campaigns/{campaign.id}", {"status": "active"}, format="json")
    assert _fields(response) == {"status": ["Read-only field: it cannot be changed."]}
    campaign.refresh_from_db()
    assert campaign.status == "draft"


def test_endpoints_without_a_body_refuse_one(api_client, account):
    campaign = CampaignFactory(account=account)
    response = api_client.post(f"/campaigns/{campaign.id}/pause", {"reason": "x"}, format="json")
    assert _fields(response) == {"reason": ["Unknown field."]}
    campaign.refresh_from_db()
    assert campaign.status == "draft"
    webhook = WebhookFactory(account=account)
    response = api_client.post(
        f"/webhooks/{webhook.id}/rotate_secret", {"secret": "mine"}, format="json"
    )
    assert _fields(response) == {"secret": ["Unknown field."]}
    # No body, or an empty object, is fine.
    assert api_client.post(f"/webhooks/{webhook.id}/rotate_secret").status_code == 200
    assert (
        api_client.post(f"/webhooks/{webhook.id}/rotate_secret", {}, format="json").status_code
        == 200
    )


def test_authentication_comes_before_body_checks(anon_client, account):
    campaign = CampaignFactory(account=account)
    response = anon_client.post(f"/campaigns/{campaign.id}/pause", {"x": 1}, format="json")
    assert_error(response, 401, "authentication_required")


@pytest.mark.parametrize("value", ["1", "0", "yes", "TRUE1"])
def test_boolean_query_parameters_take_true_or_false(api_client, value):
    assert _fields(api_client.get(f"/contacts?bounced={value}")) == {
        "bounced": ["Must be true or false."]
    }
    assert api_client.get("/contacts?bounced=true").status_code == 200
    assert api_client.get("/contacts?bounced=False").status_code == 200


@pytest.mark.parametrize("value", ["1.5", "1_0", "+5", " 5", "٣", "ten"])
def test_limit_must_be_a_plain_integer(api_client, value):
    assert _fields(api_client.get("/contacts", {"limit": value})) == {
        "limit": ["Must be an integer."]
    }
    assert api_client.get("/contacts?limit=5").status_code == 200


def test_the_schema_marks_request_bodies_closed(anon_client):
    schema = anon_client.get("/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    components = schema["components"]["schemas"]
    for name in (
        "ContactRequest",
        "PatchedContactRequest",
        "WebhookCreateInputRequest",
        "StepRequest",
    ):
        assert components[name]["additionalProperties"] is False, name
    # A map keeps its own rule: a contact's custom fields take any name.
    assert "additionalProperties" not in components["ContactRequest"]["properties"]["fields"]
