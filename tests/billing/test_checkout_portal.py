"""POST /billing/checkout and POST /billing/portal against recorded Stripe
responses at the HTTP boundary: what we send Stripe, exactly, and what the
caller gets back."""

import time

import pytest
from django.utils import timezone

from billing import checkout, psp
from plans.models import Plan
from tests.billing.conftest import recorded
from tests.foundation.test_errors import assert_envelope
from tests.plans.factories import PlanFactory

pytestmark = pytest.mark.django_db

CUSTOMER = "cus_RkX2bQ9mTzL4aP"
HOBBY_PRICE = "price_1QmZwPLgUG5tbmjcHobby001"


@pytest.fixture
def customer_account(account):
    account.psp_customer_id = CUSTOMER
    account.save(update_fields=["psp_customer_id"])
    return account


@pytest.fixture
def hobby():
    plan = Plan.objects.get(slug="hobby")
    plan.psp_price_id = HOBBY_PRICE
    plan.save()
    return plan


def test_it_creates_a_subscription_checkout_session(
    api_client, customer_account, hobby, recorded_stripe, settings
):
    settings.BILLING_RETURN_URL = "https://app.example.com/billing"
    session = recorded("checkout_session.json")
    recorded_stripe.answer("POST", "/v1/checkout/sessions", session)

    response = api_client.post(
        "/billing/checkout", {"plan_slug": "hobby"}, format="json", HTTP_IDEMPOTENCY_KEY="buy-1"
    )

    assert response.status_code == 200, response.content
    assert response.json() == {"url": session["url"]}
    [sent] = recorded_stripe.requests
    assert (sent.method, sent.path) == ("POST", "/v1/checkout/sessions")
    assert sent.form == {
        "mode": "subscription",
        "customer": CUSTOMER,
        "line_items[0][price]": HOBBY_PRICE,
        "line_items[0][quantity]": "1",
        "success_url": "https://app.example.com/billing?status=success",
        "cancel_url": "https://app.example.com/billing?status=cancel",
        "client_reference_id": str(customer_account.id),
        # Payable for 30 minutes: the account cannot open another checkout meanwhile.
        "expires_at": sent.form["expires_at"],
    }
    assert abs(int(sent.form["expires_at"]) - (time.time() + 30 * 60)) < 60
    assert sent.headers["authorization"] == "Bearer sk_test_recorded"
    assert sent.headers["idempotency-key"].startswith("checkout-")
    assert sent.headers["content-type"] == "application/x-www-form-urlencoded"


def test_it_keeps_the_query_of_the_return_url(
    api_client, customer_account, hobby, recorded_stripe, settings
):
    settings.BILLING_RETURN_URL = "https://app.example.com/settings?tab=billing"
    recorded_stripe.answer("POST", "/v1/checkout/sessions", recorded("checkout_session.json"))
    api_client.post("/billing/checkout", {"plan_slug": "hobby"}, format="json")
    [sent] = recorded_stripe.requests
    assert sent.form["success_url"] == "https://app.example.com/settings?tab=billing&status=success"
    assert sent.form["cancel_url"] == "https://app.example.com/settings?tab=billing&status=cancel"


def test_the_stripe_idempotency_key_follows_the_clients_key(
    customer_account, hobby, recorded_stripe
):
    recorded_stripe.answer("POST", "/v1/checkout/sessions", recorded("checkout_session.json"))
    for client_key in ["k-1", "k-1", "k-2", None, None]:
        checkout.checkout_session_start(
            account=customer_account, plan_slug="hobby", client_key=client_key
        )
    keys = [r.headers["idempotency-key"] for r in recorded_stripe.requests]
    assert keys[0] == keys[1]  # a retry of the same request: the same session at Stripe
    assert len({keys[1], keys[2], keys[3], keys[4]}) == 4  # anything else: a new session


def test_unknown_plan_is_plan_not_found(api_client, customer_account, recorded_stripe):
    response = api_client.post("/billing/checkout", {"plan_slug": "gold"}, format="json")
    assert_envelope(response, 404, "plan_not_found")
    assert recorded_stripe.requests == []


@pytest.mark.parametrize(
    "plan_kwargs, reason, said",
    [
        ({"psp_price_id": None, "tier": 0}, "free", "is free"),
        ({"psp_price_id": None, "tier": 2}, "unpriced", "has no Stripe price yet"),
        ({"public": False}, "private", "is private"),
        ({"public": False, "psp_price_id": None}, "private", "is private"),
        ({"archived_at": timezone.now()}, "archived", "is archived"),
    ],
    ids=["free", "unpriced", "private", "private-unpriced", "archived"],
)
def test_unpurchasable_plans_are_422(
    api_client, customer_account, recorded_stripe, plan_kwargs, reason, said
):
    plan = PlanFactory(**plan_kwargs)
    response = api_client.post("/billing/checkout", {"plan_slug": plan.slug}, format="json")
    body = assert_envelope(response, 422, "plan_not_purchasable")
    assert body["message"].startswith(f"The plan {plan.slug!r} {said}")
    assert body["details"] == {"reason": reason}
    assert recorded_stripe.requests == []


def test_the_catalog_free_plan_is_not_purchasable(api_client, customer_account, recorded_stripe):
    response = api_client.post("/billing/checkout", {"plan_slug": "free"}, format="json")
    body = assert_envelope(response, 422, "plan_not_purchasable")
    assert body["message"] == "The plan 'free' is free and cannot be purchased."


def test_a_catalog_plan_without_its_stripe_price_is_unpriced_not_free(
    api_client, customer_account, recorded_stripe
):
    # What a new installation has when STRIPE_PRICE_PRO was not set at its first migrate.
    Plan.objects.filter(slug="pro").update(psp_price_id=None)
    response = api_client.post("/billing/checkout", {"plan_slug": "pro"}, format="json")
    body = assert_envelope(response, 422, "plan_not_purchasable")
    assert body["message"] == (
        "The plan 'pro' has no Stripe price yet, so it cannot be purchased: the operator "
        "sets its price id (the plan's psp_price_id in the admin)."
    )
    assert body["details"] == {"reason": "unpriced"}


def test_checkout_without_a_customer_is_no_psp_customer(api_client, hobby, recorded_stripe):
    response = api_client.post("/billing/checkout", {"plan_slug": "hobby"}, format="json")
    assert_envelope(response, 422, "no_psp_customer")
    assert recorded_stripe.requests == []


@pytest.mark.parametrize("status", ["active", "trialing", "past_due"])
def test_checkout_for_a_subscribed_account_is_already_subscribed(
    api_client, customer_account, hobby, recorded_stripe, status
):
    customer_account.psp_subscription_id = "sub_1QmZwPLgUG5tbmjcCurrent"
    customer_account.psp_subscription_status = status
    customer_account.save()
    response = api_client.post("/billing/checkout", {"plan_slug": "hobby"}, format="json")
    body = assert_envelope(response, 409, "already_subscribed")
    assert f"already has a subscription ({status})" in body["message"]
    assert "billing portal" in body["message"]
    assert recorded_stripe.requests == []  # no second subscription started


def test_checkout_needs_a_plan_slug(api_client, customer_account, recorded_stripe):
    body = assert_envelope(
        api_client.post("/billing/checkout", {}, format="json"), 422, "validation_failed"
    )
    assert body["details"]["fields"] == {"plan_slug": ["This field is required."]}


def test_a_stripe_error_is_psp_unavailable(api_client, customer_account, hobby, recorded_stripe):
    recorded_stripe.answer(
        "POST", "/v1/checkout/sessions", recorded("error_resource_missing.json"), status=400
    )
    response = api_client.post("/billing/checkout", {"plan_slug": "hobby"}, format="json")
    assert_envelope(response, 502, "psp_unavailable")


def test_an_unreachable_stripe_is_psp_unavailable(
    api_client, customer_account, hobby, settings, monkeypatch
):
    monkeypatch.setattr(psp, "STRIPE_MAX_NETWORK_RETRIES", 0)
    settings.STRIPE_SECRET_KEY = "sk_test_x"
    settings.STRIPE_API_BASE = "http://127.0.0.1:1"
    response = api_client.post("/billing/checkout", {"plan_slug": "hobby"}, format="json")
    assert_envelope(response, 502, "psp_unavailable")
    response = api_client.post("/billing/portal", format="json")
    assert_envelope(response, 502, "psp_unavailable")


def test_checkout_and_portal_need_a_key(anon_client):
    assert_envelope(
        anon_client.post("/billing/checkout", {"plan_slug": "hobby"}, format="json"),
        401,
        "authentication_required",
    )
    assert_envelope(anon_client.post("/billing/portal"), 401, "authentication_required")


def test_it_opens_a_portal_session(api_client, customer_account, recorded_stripe, settings):
    settings.BILLING_RETURN_URL = "https://app.example.com/billing"
    session = recorded("portal_session.json")
    recorded_stripe.answer("POST", "/v1/billing_portal/sessions", session)

    response = api_client.post("/billing/portal", HTTP_IDEMPOTENCY_KEY="portal-1")

    assert response.status_code == 200, response.content
    assert response.json() == {"url": session["url"]}
    [sent] = recorded_stripe.requests
    assert (sent.method, sent.path) == ("POST", "/v1/billing_portal/sessions")
    assert sent.form == {"customer": CUSTOMER, "return_url": "https://app.example.com/billing"}
    assert sent.headers["idempotency-key"].startswith("portal-")


def test_portal_without_a_customer_is_no_psp_customer(api_client, recorded_stripe):
    assert_envelope(api_client.post("/billing/portal"), 422, "no_psp_customer")
    assert recorded_stripe.requests == []


def test_a_portal_stripe_error_is_psp_unavailable(api_client, customer_account, recorded_stripe):
    recorded_stripe.answer(
        "POST",
        "/v1/billing_portal/sessions",
        {"error": {"type": "invalid_request_error", "message": "No configuration provided"}},
        status=400,
    )
    assert_envelope(api_client.post("/billing/portal"), 502, "psp_unavailable")
