"""An account has at most one live subscription: checkout is refused while one is
live or a checkout is open; when Stripe reports a second live subscription anyway
(two checkouts completed), the newer is cancelled at Stripe and the older's plan kept;
an ended subscription drops the plan to free only when no other is live; reconcile
finds accounts left with two.

Subscriptions live at localstripe and reach the service as signed notifications;
Checkout (which localstripe lacks) is answered by recorded responses."""

import time
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from accounts.models import Account
from billing.models import CheckoutSession, PspEvent
from plans.models import Plan
from tests.accounts.factories import AccountFactory
from tests.billing.conftest import (
    localstripe_cancel,
    localstripe_card_on_file,
    localstripe_price,
    localstripe_subscribe,
    recorded,
    signed_event_post,
    stripe_event,
)
from tests.conftest import client_for
from tests.foundation.test_errors import assert_envelope

pytestmark = pytest.mark.django_db


@pytest.fixture
def stripe_peer(stripe_settings):
    for slug, amount in [("hobby", 900), ("pro", 4900)]:
        Plan.objects.filter(slug=slug).update(
            psp_price_id=localstripe_price(stripe_settings, f"price_{slug}_one", amount=amount)
        )
    return stripe_settings


@pytest.fixture
def payer(stripe_peer):
    customer_id = stripe_peer.post("/v1/customers", {"email": "payer@example.com"})["id"]
    localstripe_card_on_file(stripe_peer, customer_id)
    return AccountFactory(psp_customer_id=customer_id)


def _two_subscriptions(peer, account) -> tuple[dict, dict]:
    """Two checkouts completed: a hobby subscription, then (a second later) a pro one."""
    first = localstripe_subscribe(peer, account.psp_customer_id, "price_hobby_one")
    time.sleep(1.1)  # Stripe's `created` is in seconds: the second is newer
    second = localstripe_subscribe(peer, account.psp_customer_id, "price_pro_one")
    return first, second


def _state(account) -> tuple[str, str | None]:
    account = Account.objects.select_related("plan").get(pk=account.pk)
    return account.plan.slug, account.psp_subscription_id


def _status_at_stripe(peer, subscription: dict) -> str:
    return peer.get(f"/v1/subscriptions/{subscription['id']}")["status"]


def test_a_second_live_subscription_is_cancelled_and_the_first_kept(
    anon_client, stripe_peer, payer
):
    first = localstripe_subscribe(stripe_peer, payer.psp_customer_id, "price_hobby_one")
    signed_event_post(anon_client, stripe_event("customer.subscription.created", first))
    assert _state(payer) == ("hobby", first["id"])
    # A second checkout completes.
    second = localstripe_subscribe(stripe_peer, payer.psp_customer_id, "price_pro_one")

    response = signed_event_post(anon_client, stripe_event("customer.subscription.created", second))

    assert response.status_code == 200
    assert response.json()["outcome"] == "processed"
    assert _state(payer) == ("hobby", first["id"])
    assert _status_at_stripe(stripe_peer, first) == "active"
    assert _status_at_stripe(stripe_peer, second) == "canceled"
    detail = PspEvent.objects.get(pk=response.json()["id"]).detail
    assert f"cancelled duplicate {second['id']}" in detail
    # Its deletion notification changes nothing.
    ended = stripe_peer.get(f"/v1/subscriptions/{second['id']}")
    response = signed_event_post(anon_client, stripe_event("customer.subscription.deleted", ended))
    assert response.json()["outcome"] == "ignored"
    assert _state(payer) == ("hobby", first["id"])


def test_both_live_when_the_first_notification_arrives(anon_client, stripe_peer, payer):
    # Both checkouts completed before either notification: the first one handled
    # already finds two live subscriptions.
    first, second = _two_subscriptions(stripe_peer, payer)

    response = signed_event_post(anon_client, stripe_event("customer.subscription.created", first))

    assert _state(payer) == ("hobby", first["id"])
    assert _status_at_stripe(stripe_peer, second) == "canceled"
    detail = PspEvent.objects.get(pk=response.json()["id"]).detail
    assert f"cancelled duplicate {second['id']}" in detail
    signed_event_post(anon_client, stripe_event("customer.subscription.created", second))
    assert _state(payer) == ("hobby", first["id"])


def test_the_older_is_kept_whatever_order_the_notifications_come_in(
    anon_client, stripe_peer, payer
):
    first, second = _two_subscriptions(stripe_peer, payer)

    signed_event_post(anon_client, stripe_event("customer.subscription.created", second))
    assert _state(payer) == ("hobby", first["id"])
    signed_event_post(anon_client, stripe_event("customer.subscription.created", first))

    assert _state(payer) == ("hobby", first["id"])
    assert _status_at_stripe(stripe_peer, first) == "active"
    assert _status_at_stripe(stripe_peer, second) == "canceled"
    client = client_for_account(payer)
    body = client.get("/billing/subscription").json()
    assert (body["plan"]["slug"], body["psp_subscription_id"]) == ("hobby", first["id"])


def client_for_account(account):
    from accounts.services import api_key_create

    return client_for(api_key_create(account=account, label="t").plaintext)


def test_an_ended_subscription_drops_to_free_only_when_no_other_is_live(
    anon_client, stripe_peer, payer
):
    first = localstripe_subscribe(stripe_peer, payer.psp_customer_id, "price_hobby_one")
    signed_event_post(anon_client, stripe_event("customer.subscription.created", first))
    # A second subscription whose notification never came (so it was not cancelled);
    # then the first is cancelled in the portal.
    second = localstripe_subscribe(stripe_peer, payer.psp_customer_id, "price_pro_one")
    ended = localstripe_cancel(stripe_peer, first["id"])

    signed_event_post(anon_client, stripe_event("customer.subscription.deleted", ended))

    # The other live subscription is the account's now: it is paying for pro.
    assert _state(payer) == ("pro", second["id"])
    assert _status_at_stripe(stripe_peer, second) == "active"

    ended = localstripe_cancel(stripe_peer, second["id"])
    signed_event_post(anon_client, stripe_event("customer.subscription.deleted", ended))
    assert _state(payer) == ("free", None)


def test_reconcile_finds_an_account_with_two_live_subscriptions(stripe_peer, payer):
    # No notification reached the service: the account is on free, two subscriptions
    # are charging its customer.
    first, second = _two_subscriptions(stripe_peer, payer)
    untouched = AccountFactory()

    out, err = StringIO(), StringIO()
    call_command("billing_reconcile", stdout=out, stderr=err)

    assert _state(payer) == ("hobby", first["id"])
    assert _status_at_stripe(stripe_peer, second) == "canceled"
    assert f"cancelled duplicate {second['id']}" in out.getvalue()
    assert "(free -> hobby)" in out.getvalue()
    assert untouched.email not in out.getvalue()
    assert err.getvalue() == ""

    # Converged: a second run changes nothing and cancels nothing more.
    out = StringIO()
    call_command("billing_reconcile", stdout=out, stderr=err)
    assert "cancelled" not in out.getvalue()
    assert _status_at_stripe(stripe_peer, first) == "active"


def test_reconcile_cancels_a_second_subscription_of_a_subscribed_account(
    anon_client, stripe_peer, payer
):
    first, second = _two_subscriptions(stripe_peer, payer)
    signed_event_post(anon_client, stripe_event("customer.subscription.created", first))
    # Only the first's notification arrived.

    call_command("billing_reconcile", stdout=StringIO(), stderr=StringIO())

    assert _state(payer) == ("hobby", first["id"])
    assert _status_at_stripe(stripe_peer, second) == "canceled"


# --- checkout while another is open -----------------------------------------------------------

CUSTOMER = "cus_RkX2bQ9mTzL4aP"


@pytest.fixture
def buyer(account):
    account.psp_customer_id = CUSTOMER
    account.save(update_fields=["psp_customer_id"])
    Plan.objects.filter(slug="hobby").update(psp_price_id="price_hobby_rec")
    Plan.objects.filter(slug="pro").update(psp_price_id="price_pro_rec")
    return account


def _open_session(recorded_stripe, session_id: str = "cs_test_open_1") -> dict:
    session = {
        **recorded("checkout_session.json"),
        "id": session_id,
        "url": f"https://checkout.stripe.com/c/pay/{session_id}",
        "status": "open",
        "expires_at": int(time.time()) + 1800,
    }
    recorded_stripe.answer("POST", "/v1/checkout/sessions", session)
    recorded_stripe.answer("GET", f"/v1/checkout/sessions/{session_id}", session)
    return session


def _checkouts(recorded_stripe) -> int:
    return sum(
        1
        for r in recorded_stripe.requests
        if (r.method, r.path) == ("POST", "/v1/checkout/sessions")
    )


def test_checkout_is_refused_while_another_is_open(api_client, buyer, recorded_stripe):
    session = _open_session(recorded_stripe)
    assert api_client.post("/billing/checkout", {"plan_slug": "hobby"}, format="json").json() == {
        "url": session["url"]
    }

    response = api_client.post("/billing/checkout", {"plan_slug": "pro"}, format="json")

    body = assert_envelope(response, 409, "checkout_in_progress")
    assert body["details"]["url"] == session["url"]
    assert body["details"]["plan_slug"] == "hobby"
    assert body["details"]["expires_at"].endswith("Z")
    assert _checkouts(recorded_stripe) == 1  # nothing more started at Stripe


def test_checkout_is_allowed_again_once_stripe_expired_the_open_one(
    api_client, buyer, recorded_stripe
):
    session = _open_session(recorded_stripe)
    api_client.post("/billing/checkout", {"plan_slug": "hobby"}, format="json")
    recorded_stripe.answer(
        "GET", f"/v1/checkout/sessions/{session['id']}", {**session, "status": "expired"}
    )

    response = api_client.post("/billing/checkout", {"plan_slug": "pro"}, format="json")

    assert response.status_code == 200
    assert _checkouts(recorded_stripe) == 2
    statuses = sorted(CheckoutSession.objects.values_list("status", flat=True))
    assert statuses == ["expired", "open"]


def test_a_checkout_past_its_expiry_is_not_asked_about(api_client, buyer, recorded_stripe):
    session = _open_session(recorded_stripe)
    api_client.post("/billing/checkout", {"plan_slug": "hobby"}, format="json")
    CheckoutSession.objects.update(expires_at=timezone.now() - timedelta(seconds=1))

    assert (
        api_client.post("/billing/checkout", {"plan_slug": "pro"}, format="json").status_code == 200
    )
    assert not [r for r in recorded_stripe.requests if r.path.endswith(session["id"])]


def test_a_completed_checkout_whose_subscription_is_not_known_yet_is_already_subscribed(
    api_client, buyer, recorded_stripe
):
    session = _open_session(recorded_stripe)
    api_client.post("/billing/checkout", {"plan_slug": "hobby"}, format="json")
    recorded_stripe.answer(
        "GET", f"/v1/checkout/sessions/{session['id']}", {**session, "status": "complete"}
    )
    live = recorded("subscription_current_api.json")
    recorded_stripe.answer(
        "GET",
        "/v1/subscriptions",
        {"object": "list", "data": [live], "has_more": False, "url": "/v1/subscriptions"},
    )

    response = api_client.post("/billing/checkout", {"plan_slug": "pro"}, format="json")

    assert_envelope(response, 409, "already_subscribed")
    assert _checkouts(recorded_stripe) == 1


def test_a_completed_checkout_whose_subscription_ended_lets_the_account_buy_again(
    api_client, buyer, recorded_stripe
):
    session = _open_session(recorded_stripe)
    api_client.post("/billing/checkout", {"plan_slug": "hobby"}, format="json")
    recorded_stripe.answer(
        "GET", f"/v1/checkout/sessions/{session['id']}", {**session, "status": "complete"}
    )
    # The default answer: the customer has no live subscription.
    assert (
        api_client.post("/billing/checkout", {"plan_slug": "pro"}, format="json").status_code == 200
    )


def test_a_checkout_being_created_blocks_another(api_client, buyer, recorded_stripe):
    _open_session(recorded_stripe)
    CheckoutSession.objects.create(account=buyer, plan_slug="hobby", status="creating")

    response = api_client.post("/billing/checkout", {"plan_slug": "pro"}, format="json")

    assert_envelope(response, 409, "checkout_in_progress")
    assert _checkouts(recorded_stripe) == 0


def test_a_claim_left_by_a_dead_request_does_not_block_for_long(api_client, buyer, recorded_stripe):
    _open_session(recorded_stripe)
    claim = CheckoutSession.objects.create(account=buyer, plan_slug="hobby", status="creating")
    CheckoutSession.objects.filter(pk=claim.pk).update(
        created_at=timezone.now() - timedelta(minutes=5)
    )

    assert (
        api_client.post("/billing/checkout", {"plan_slug": "pro"}, format="json").status_code == 200
    )
    claim.refresh_from_db()
    assert claim.status == "failed"


def test_a_stripe_failure_leaves_no_claim_behind(api_client, buyer, recorded_stripe):
    recorded_stripe.answer(
        "POST", "/v1/checkout/sessions", recorded("error_resource_missing.json"), status=400
    )
    assert_envelope(
        api_client.post("/billing/checkout", {"plan_slug": "hobby"}, format="json"),
        502,
        "psp_unavailable",
    )
    assert not CheckoutSession.objects.exists()
    _open_session(recorded_stripe)
    assert (
        api_client.post("/billing/checkout", {"plan_slug": "hobby"}, format="json").status_code
        == 200
    )
