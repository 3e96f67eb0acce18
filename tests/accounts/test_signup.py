import logging

import pytest
from django.db import OperationalError, connection
from rest_framework.test import APIClient

from accounts.models import Account, ApiKey
from accounts.tokens import token_hash
from tests.accounts.helpers import assert_envelope
from tests.conftest import client_for

pytestmark = pytest.mark.django_db


def signup(client, payload, **extra):
    return client.post("/signup", payload, format="json", **extra)


def test_it_creates_an_account_on_the_free_plan_with_a_key(anon_client):
    response = signup(anon_client, {"email": "Owner@Example.com", "name": "Owner"})
    assert response.status_code == 201, response.content
    body = response.json()
    assert set(body) == {"account_id", "plan_slug", "api_key"}
    assert set(body["api_key"]) == {"id", "prefix", "plaintext"}
    assert body["plan_slug"] == "free"
    account = Account.objects.get(pk=body["account_id"])
    assert (account.email, account.name, account.plan.slug) == (
        "Owner@Example.com",
        "Owner",
        "free",
    )
    assert account.psp_customer_id is None  # Provider not configured.
    key = ApiKey.objects.get(account=account)
    plaintext = body["api_key"]["plaintext"]
    assert str(key.pk) == body["api_key"]["id"]
    assert (key.label, key.client_kind) == ("Signup default", "direct")
    assert plaintext.startswith("ak_live_") and len(plaintext) == 51
    assert key.prefix == plaintext[:12] == body["api_key"]["prefix"]
    assert key.key_hash == token_hash(plaintext)


def test_the_signup_key_authenticates(anon_client):
    plaintext = signup(anon_client, {"email": "a@example.com"}).json()["api_key"]["plaintext"]
    response = client_for(plaintext).get("/api_keys")
    assert response.status_code == 200
    assert [k["label"] for k in response.json()] == ["Signup default"]


def test_name_is_optional(anon_client):
    response = signup(anon_client, {"email": "noname@example.com"})
    assert response.status_code == 201
    assert Account.objects.get(pk=response.json()["account_id"]).name == ""


@pytest.mark.parametrize(
    "payload, message",
    [
        ({}, "This field is required."),
        ({"email": ""}, "This field may not be blank."),
        ({"email": "not-an-email"}, "Enter a valid email address."),
        ({"email": None}, "This field may not be null."),
    ],
)
def test_missing_or_invalid_email_is_validation_failed(anon_client, payload, message):
    body = assert_envelope(signup(anon_client, payload), 422, "validation_failed")
    assert body["details"]["fields"]["email"] == [message]
    assert Account.objects.count() == 0


def test_duplicate_email_is_validation_failed_case_insensitively(anon_client):
    assert signup(anon_client, {"email": "taken@example.com"}).status_code == 201
    body = assert_envelope(
        signup(anon_client, {"email": "TAKEN@Example.COM"}), 422, "validation_failed"
    )
    assert body["details"]["fields"]["email"] == ["An account with this email already exists."]
    assert Account.objects.count() == 1


def test_idempotency_key_is_ignored_on_signup(anon_client):
    first = signup(anon_client, {"email": "one@example.com"}, HTTP_IDEMPOTENCY_KEY="k1")
    second = signup(anon_client, {"email": "two@example.com"}, HTTP_IDEMPOTENCY_KEY="k1")
    assert first.status_code == second.status_code == 201
    assert "Idempotent-Replay" not in second
    assert Account.objects.count() == 2


def test_a_bearer_header_is_ignored_on_signup(anon_client):
    response = signup(
        anon_client, {"email": "bearer@example.com"}, HTTP_AUTHORIZATION="Bearer nonsense"
    )
    assert response.status_code == 201


def test_signup_creates_the_provider_customer(anon_client, stripe_settings):
    response = signup(anon_client, {"email": "paying@example.com", "name": "Paying Co"})
    assert response.status_code == 201, response.content
    account = Account.objects.get(pk=response.json()["account_id"])
    assert account.psp_customer_id
    customer = stripe_settings.get(f"/v1/customers/{account.psp_customer_id}")
    assert customer["email"] == "paying@example.com"
    assert customer["metadata"] == {"account_id": str(account.pk)}


def test_provider_failure_leaves_nothing_and_is_502(anon_client, settings):
    settings.STRIPE_SECRET_KEY = "sk_test_unreachable"
    settings.STRIPE_API_BASE = "http://127.0.0.1:1"  # Nothing listens there.
    response = signup(anon_client, {"email": "unlucky@example.com"})
    assert_envelope(response, 502, "psp_unavailable")
    assert not Account.objects.filter(email="unlucky@example.com").exists()
    assert ApiKey.objects.count() == 0


def _database_fails_when_saving_the_customer(then=None):
    """An execute wrapper: the INSERT of the account, which stores the provider customer
    id made before it, fails."""

    def wrapper(execute, sql, params, many, context):
        if sql.startswith('INSERT INTO "accounts_account"') and "psp_customer_id" in sql:
            if then is not None:
                then()
            raise OperationalError("the database went away")
        return execute(sql, params, many, context)

    return wrapper


def _customers_with(localstripe, email: str) -> list[dict]:
    return [c for c in localstripe.get("/v1/customers?limit=100")["data"] if c["email"] == email]


@pytest.mark.django_db(transaction=True)
def test_database_failure_after_the_provider_deletes_the_customer(stripe_settings):
    client = APIClient(raise_request_exception=False)
    with connection.execute_wrapper(_database_fails_when_saving_the_customer()):
        response = signup(client, {"email": "doomed@example.com"})
    assert_envelope(response, 500, "internal_error")
    assert not Account.objects.filter(email="doomed@example.com").exists()
    assert ApiKey.objects.count() == 0
    assert _customers_with(stripe_settings, "doomed@example.com") == []
    # The same email signs up fine afterwards, with one customer.
    assert signup(client, {"email": "doomed@example.com"}).status_code == 201
    assert len(_customers_with(stripe_settings, "doomed@example.com")) == 1


@pytest.mark.django_db(transaction=True)
def test_a_customer_that_cannot_be_deleted_is_named_in_a_warning(stripe_settings, settings, caplog):
    def provider_goes_away():
        settings.STRIPE_API_BASE = "http://127.0.0.1:1"  # nothing listens there

    client = APIClient(raise_request_exception=False)
    wrapper = _database_fails_when_saving_the_customer(then=provider_goes_away)
    with (
        caplog.at_level(logging.WARNING, logger="billing.psp"),
        connection.execute_wrapper(wrapper),
    ):
        response = signup(client, {"email": "stranded@example.com"})
    assert_envelope(response, 500, "internal_error")
    assert not Account.objects.filter(email="stranded@example.com").exists()
    [customer] = _customers_with(stripe_settings, "stranded@example.com")
    assert f"stripe customer {customer['id']} of an uncommitted signup not deleted" in caplog.text
