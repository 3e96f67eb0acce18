"""POST /webhooks/psp: Stripe-Signature verification, one record per event id,
and plan changes that follow the subscription as Stripe has it now (re-read
from localstripe, or from recorded current-API responses), whatever the order
or repetition of the events."""

import json
import logging
import threading
import time
from datetime import UTC, datetime

import pytest
import stripe
from django.db import connections
from django.test import Client

from accounts.models import Account
from billing import psp
from billing.models import PspEvent
from billing.psp_events import psp_event_handle
from billing.subscriptions import account_plan_assign
from plans.models import Plan
from tests.accounts.factories import AccountFactory
from tests.billing.conftest import (
    WEBHOOK_SECRET,
    localstripe_cancel,
    localstripe_card_on_file,
    localstripe_change_price,
    localstripe_price,
    localstripe_subscribe,
    recorded,
    signed_event_post,
    stripe_event,
)
from tests.foundation.test_errors import assert_envelope
from tests.plans.factories import PlanFactory

pytestmark = pytest.mark.django_db


def ts(value: int) -> datetime:
    return datetime.fromtimestamp(value, tz=UTC)


@pytest.fixture
def peer(stripe_settings):
    """localstripe with a hobby and a pro price mapped to the catalog plans."""
    for slug in ["hobby", "pro"]:
        price = localstripe_price(
            stripe_settings, f"price_{slug}_ls", amount=900 if slug == "hobby" else 4900
        )
        Plan.objects.filter(slug=slug).update(psp_price_id=price)
    return stripe_settings


@pytest.fixture
def customer(peer):
    """An account whose customer exists at localstripe, with a card on file."""
    customer_id = peer.post("/v1/customers", {"email": "payer@example.com"})["id"]
    localstripe_card_on_file(peer, customer_id)
    return AccountFactory(psp_customer_id=customer_id)


def reload(account) -> Account:
    return Account.objects.select_related("plan").get(pk=account.pk)


# --- Signature ---------------------------------------------------------------


def _event_for_unknown_customer():
    return stripe_event(
        "customer.subscription.created",
        {"id": "sub_x", "object": "subscription", "customer": "cus_x"},
    )


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "garbage",
        "t=123",
        "v1=abc",
    ],
    ids=["missing", "empty", "garbage", "no-signature", "no-timestamp"],
)
def test_a_missing_or_malformed_signature_is_400(anon_client, settings, header):
    settings.STRIPE_WEBHOOK_SECRET = WEBHOOK_SECRET
    extra = {} if header is None else {"HTTP_STRIPE_SIGNATURE": header}
    response = anon_client.post(
        "/webhooks/psp",
        data=json.dumps(_event_for_unknown_customer()),
        content_type="application/json",
        **extra,
    )
    assert_envelope(response, 400, "invalid_signature")
    assert PspEvent.objects.count() == 0


def test_a_signature_made_with_another_secret_is_400(anon_client, settings):
    settings.STRIPE_WEBHOOK_SECRET = WEBHOOK_SECRET
    response = signed_event_post(anon_client, _event_for_unknown_customer(), secret="whsec_other")
    assert_envelope(response, 400, "invalid_signature")
    assert PspEvent.objects.count() == 0


def test_a_tampered_body_is_400(anon_client, settings):
    settings.STRIPE_WEBHOOK_SECRET = WEBHOOK_SECRET
    event = _event_for_unknown_customer()
    payload = json.dumps(event)
    header = stripe.WebhookSignature.generate_signature_header(payload, WEBHOOK_SECRET)
    response = anon_client.post(
        "/webhooks/psp",
        data=payload.replace("cus_x", "cus_y"),
        content_type="application/json",
        HTTP_STRIPE_SIGNATURE=header,
    )
    assert_envelope(response, 400, "invalid_signature")
    assert PspEvent.objects.count() == 0


def test_an_old_timestamp_is_400(anon_client, settings):
    settings.STRIPE_WEBHOOK_SECRET = WEBHOOK_SECRET
    response = signed_event_post(
        anon_client, _event_for_unknown_customer(), timestamp=int(time.time()) - 301
    )
    assert_envelope(response, 400, "invalid_signature")


def test_without_a_configured_secret_nothing_verifies(anon_client, settings):
    settings.STRIPE_WEBHOOK_SECRET = ""
    response = signed_event_post(anon_client, _event_for_unknown_customer(), secret="whsec_any")
    assert_envelope(response, 400, "invalid_signature")
    assert PspEvent.objects.count() == 0


def test_a_signed_body_that_is_not_an_event_is_400(anon_client, settings):
    settings.STRIPE_WEBHOOK_SECRET = WEBHOOK_SECRET
    for payload in ["{not json", json.dumps([1, 2]), json.dumps({"type": "x"})]:
        header = stripe.WebhookSignature.generate_signature_header(payload, WEBHOOK_SECRET)
        response = anon_client.post(
            "/webhooks/psp",
            data=payload,
            content_type="application/json",
            HTTP_STRIPE_SIGNATURE=header,
        )
        assert_envelope(response, 400, "invalid_json")
    assert PspEvent.objects.count() == 0


def test_it_needs_no_api_key_and_no_csrf_token(settings):
    settings.STRIPE_WEBHOOK_SECRET = WEBHOOK_SECRET
    client = Client(enforce_csrf_checks=True)
    response = signed_event_post(client, stripe_event("charge.succeeded", {"id": "ch_1"}))
    assert response.status_code == 200


def test_the_route_is_the_provider_endpoint_not_a_webhook_id(api_client):
    # /webhooks/psp resolves to this endpoint (POST only), not /webhooks/<id>.
    assert_envelope(api_client.get("/webhooks/psp"), 405, "method_not_allowed")


# --- Recording -----------------------------------------------------------------


def test_an_unhandled_type_is_200_and_recorded(anon_client, settings):
    settings.STRIPE_WEBHOOK_SECRET = WEBHOOK_SECRET
    event = stripe_event("payment_intent.created", {"id": "pi_1", "object": "payment_intent"})
    response = signed_event_post(anon_client, event)
    assert response.status_code == 200
    assert response.json() == {"id": event["id"], "outcome": "ignored"}
    row = PspEvent.objects.get()
    assert (row.id, row.type, row.outcome, row.payload) == (
        event["id"],
        "payment_intent.created",
        "ignored",
        event,
    )


def test_an_unknown_customer_is_recorded_not_an_error(anon_client, settings, account, caplog):
    settings.STRIPE_WEBHOOK_SECRET = WEBHOOK_SECRET
    event = stripe_event(
        "customer.subscription.created",
        {
            "id": "sub_nobody",
            "object": "subscription",
            "customer": "cus_nobody",
            "status": "active",
        },
    )
    with caplog.at_level(logging.WARNING, logger="billing.psp_events"):
        response = signed_event_post(anon_client, event)
    assert response.status_code == 200
    assert response.json()["outcome"] == "unknown_customer"
    row = PspEvent.objects.get()
    assert (row.outcome, row.psp_customer_id, row.account) == (
        "unknown_customer",
        "cus_nobody",
        None,
    )
    assert "cus_nobody" in caplog.text
    assert reload(account).plan.slug == "free"


def test_a_repeated_event_is_ignored(anon_client, peer, customer):
    subscription = localstripe_subscribe(peer, customer.psp_customer_id, "price_hobby_ls")
    event = stripe_event("customer.subscription.created", subscription)
    assert signed_event_post(anon_client, event).json()["outcome"] == "processed"
    assert reload(customer).plan.slug == "hobby"
    # Staff move the account by hand; a replay of the old event must not undo it.
    private = PlanFactory(public=False)
    account_plan_assign(account=customer, plan=private)

    response = signed_event_post(anon_client, event)

    assert response.status_code == 200
    assert response.json() == {"id": event["id"], "outcome": "duplicate"}
    assert reload(customer).plan == private
    assert PspEvent.objects.filter(id=event["id"]).count() == 1


# --- Subscription events, re-read from Stripe ---------------------------------


def test_subscription_created_moves_the_account_to_the_paid_plan(anon_client, peer, customer):
    subscription = localstripe_subscribe(peer, customer.psp_customer_id, "price_hobby_ls")

    response = signed_event_post(
        anon_client, stripe_event("customer.subscription.created", subscription)
    )

    assert response.status_code == 200
    assert response.json()["outcome"] == "processed"
    account = reload(customer)
    assert account.plan.slug == "hobby"
    assert account.psp_subscription_id == subscription["id"]
    assert account.psp_subscription_status == "active"
    # localstripe speaks an old API version: the period is on the subscription.
    assert account.psp_current_period_start == ts(subscription["current_period_start"])
    assert account.psp_current_period_end == ts(subscription["current_period_end"])
    row = PspEvent.objects.get()
    assert (row.account_id, row.psp_subscription_id) == (customer.pk, subscription["id"])


def test_deleted_returns_the_account_to_free(anon_client, peer, customer):
    subscription = localstripe_subscribe(peer, customer.psp_customer_id, "price_hobby_ls")
    signed_event_post(anon_client, stripe_event("customer.subscription.created", subscription))
    ended = localstripe_cancel(peer, subscription["id"])

    response = signed_event_post(anon_client, stripe_event("customer.subscription.deleted", ended))

    assert response.json()["outcome"] == "processed"
    account = reload(customer)
    assert account.plan.slug == "free"
    assert account.psp_subscription_id is None
    assert account.psp_subscription_status == "canceled"
    assert account.psp_current_period_start is None


def test_events_out_of_order_end_in_stripes_state(anon_client, peer, customer):
    """created -> (upgrade to pro) -> deleted at Stripe; the events arrive
    deleted, updated, created. Every handler re-reads Stripe, so the account
    ends free whatever the order."""
    subscription = localstripe_subscribe(peer, customer.psp_customer_id, "price_hobby_ls")
    created = stripe_event("customer.subscription.created", subscription)
    updated = stripe_event(
        "customer.subscription.updated",
        localstripe_change_price(peer, subscription, "price_pro_ls"),
    )
    deleted = stripe_event(
        "customer.subscription.deleted", localstripe_cancel(peer, subscription["id"])
    )

    outcomes = [
        signed_event_post(anon_client, e).json()["outcome"] for e in [deleted, updated, created]
    ]

    assert outcomes == ["ignored", "ignored", "ignored"]  # never the account's subscription
    account = reload(customer)
    assert account.plan.slug == "free"
    assert account.psp_subscription_id is None


def test_a_stale_created_after_an_upgrade_keeps_the_upgrade(anon_client, peer, customer):
    subscription = localstripe_subscribe(peer, customer.psp_customer_id, "price_hobby_ls")
    created = stripe_event("customer.subscription.created", subscription)
    updated = stripe_event(
        "customer.subscription.updated",
        localstripe_change_price(peer, subscription, "price_pro_ls"),
    )

    signed_event_post(anon_client, updated)
    signed_event_post(anon_client, created)  # its payload still says hobby
    signed_event_post(anon_client, updated)  # and a duplicate for good measure

    assert reload(customer).plan.slug == "pro"
    assert PspEvent.objects.count() == 2


def test_an_old_subscription_ending_does_not_undo_the_current_one(anon_client, peer, customer):
    old = localstripe_subscribe(peer, customer.psp_customer_id, "price_hobby_ls")
    signed_event_post(anon_client, stripe_event("customer.subscription.created", old))
    ended = localstripe_cancel(peer, old["id"])
    new = localstripe_subscribe(peer, customer.psp_customer_id, "price_pro_ls")
    signed_event_post(anon_client, stripe_event("customer.subscription.created", new))

    # The old one's deletion arrives late: it is not the current one any more.
    response = signed_event_post(anon_client, stripe_event("customer.subscription.deleted", ended))

    assert response.json()["outcome"] == "ignored"
    account = reload(customer)
    assert (account.plan.slug, account.psp_subscription_id) == ("pro", new["id"])


def test_an_unmapped_price_is_logged_recorded_and_changes_nothing(
    anon_client, peer, customer, caplog
):
    localstripe_price(peer, "price_legacy_ls")
    subscription = localstripe_subscribe(peer, customer.psp_customer_id, "price_legacy_ls")
    event = stripe_event("customer.subscription.created", subscription)

    with caplog.at_level(logging.WARNING, logger="billing.psp_events"):
        response = signed_event_post(anon_client, event)

    assert response.status_code == 200
    assert response.json()["outcome"] == "unmapped"
    assert "price_legacy_ls" in caplog.text
    row = PspEvent.objects.get()
    assert row.outcome == "unmapped" and "price_legacy_ls" in row.detail
    account = reload(customer)
    assert (account.plan.slug, account.psp_subscription_id) == ("free", None)


def test_a_subscription_stripe_does_not_know_is_unmapped(anon_client, peer, customer):
    event = stripe_event(
        "customer.subscription.updated",
        {"id": "sub_unknown", "object": "subscription", "customer": customer.psp_customer_id},
    )
    response = signed_event_post(anon_client, event)
    assert response.status_code == 200
    assert response.json()["outcome"] == "unmapped"
    assert reload(customer).plan.slug == "free"


def test_deleted_for_a_subscription_stripe_no_longer_has_ends_it(anon_client, peer, customer):
    subscription = localstripe_subscribe(peer, customer.psp_customer_id, "price_hobby_ls")
    signed_event_post(anon_client, stripe_event("customer.subscription.created", subscription))
    peer.flush()  # Stripe forgot it entirely

    response = signed_event_post(
        anon_client, stripe_event("customer.subscription.deleted", subscription)
    )

    assert response.json()["outcome"] == "processed"
    assert reload(customer).plan.slug == "free"


def test_a_subscription_of_another_customer_is_unmapped(anon_client, peer, customer):
    stranger = peer.post("/v1/customers", {"email": "stranger@example.com"})["id"]
    localstripe_card_on_file(peer, stranger)
    subscription = localstripe_subscribe(peer, stranger, "price_pro_ls")
    # A forged-looking event: our customer's id around someone else's subscription.
    event = stripe_event(
        "customer.subscription.created", {**subscription, "customer": customer.psp_customer_id}
    )
    assert signed_event_post(anon_client, event).json()["outcome"] == "unmapped"
    assert reload(customer).plan.slug == "free"


# --- Invoice events ------------------------------------------------------------


def test_invoice_paid_refreshes_the_period(anon_client, peer, customer):
    subscription = localstripe_subscribe(peer, customer.psp_customer_id, "price_hobby_ls")
    Account.objects.filter(pk=customer.pk).update(
        plan=Plan.objects.get(slug="hobby"),
        psp_subscription_id=subscription["id"],
        psp_subscription_status="active",
        psp_current_period_start=datetime(2020, 1, 1, tzinfo=UTC),
        psp_current_period_end=datetime(2020, 2, 1, tzinfo=UTC),
    )
    invoice = peer.get(f"/v1/invoices/{subscription['latest_invoice']}")
    assert invoice["subscription"] == subscription["id"]  # the pre-2025 invoice shape

    response = signed_event_post(anon_client, stripe_event("invoice.paid", invoice))

    assert response.json()["outcome"] == "processed"
    account = reload(customer)
    assert account.psp_current_period_start == ts(subscription["current_period_start"])
    assert account.psp_current_period_end == ts(subscription["current_period_end"])
    assert account.plan.slug == "hobby"


def test_invoice_paid_before_subscription_created_still_lands_on_the_plan(
    anon_client, peer, customer
):
    subscription = localstripe_subscribe(peer, customer.psp_customer_id, "price_pro_ls")
    invoice = peer.get(f"/v1/invoices/{subscription['latest_invoice']}")
    signed_event_post(anon_client, stripe_event("invoice.paid", invoice))
    signed_event_post(anon_client, stripe_event("customer.subscription.created", subscription))
    account = reload(customer)
    assert (account.plan.slug, account.psp_subscription_id) == ("pro", subscription["id"])


def test_a_stale_payment_failure_leaves_a_recovered_subscription_active(
    anon_client, peer, customer
):
    # The notification arrives after the payment went through: Stripe has the
    # subscription active, and so does the account.
    subscription = localstripe_subscribe(peer, customer.psp_customer_id, "price_hobby_ls")
    signed_event_post(anon_client, stripe_event("customer.subscription.created", subscription))
    invoice = peer.get(f"/v1/invoices/{subscription['latest_invoice']}")

    response = signed_event_post(anon_client, stripe_event("invoice.payment_failed", invoice))

    assert response.json()["outcome"] == "processed"
    account = reload(customer)
    assert (account.plan.slug, account.psp_subscription_status) == ("hobby", "active")


def test_invoice_payment_failed_on_a_canceled_subscription_ends_it(anon_client, peer, customer):
    subscription = localstripe_subscribe(peer, customer.psp_customer_id, "price_hobby_ls")
    signed_event_post(anon_client, stripe_event("customer.subscription.created", subscription))
    invoice = peer.get(f"/v1/invoices/{subscription['latest_invoice']}")
    localstripe_cancel(peer, subscription["id"])

    signed_event_post(anon_client, stripe_event("invoice.payment_failed", invoice))

    assert reload(customer).plan.slug == "free"


def test_an_invoice_without_a_subscription_is_ignored(anon_client, peer, customer):
    event = stripe_event(
        "invoice.paid",
        {
            "id": "in_oneoff",
            "object": "invoice",
            "customer": customer.psp_customer_id,
            "subscription": None,
        },
    )
    response = signed_event_post(anon_client, event)
    assert response.json()["outcome"] == "ignored"
    assert PspEvent.objects.get().outcome == "ignored"


# --- Current Stripe API shape (recorded responses) -----------------------------

CURRENT_SUBSCRIPTION = recorded("subscription_current_api.json")


@pytest.fixture
def current_api_account(recorded_stripe):
    subscription = CURRENT_SUBSCRIPTION
    price = subscription["items"]["data"][0]["price"]["id"]
    Plan.objects.filter(slug="pro").update(psp_price_id=price)
    recorded_stripe.answer("GET", f"/v1/subscriptions/{subscription['id']}", subscription)
    return AccountFactory(psp_customer_id=subscription["customer"])


def current_api_invoice(invoice_id: str, status: str) -> dict:
    """An invoice of CURRENT_SUBSCRIPTION in the current API shape."""
    return {
        "id": invoice_id,
        "object": "invoice",
        "customer": CURRENT_SUBSCRIPTION["customer"],
        "parent": {
            "quote_details": None,
            "subscription_details": {"metadata": {}, "subscription": CURRENT_SUBSCRIPTION["id"]},
            "type": "subscription_details",
        },
        "status": status,
    }


def test_current_api_invoice_and_item_level_period(
    anon_client, recorded_stripe, current_api_account
):
    # Since 2025-03-31 an invoice names its subscription under parent.subscription_details,
    # and the period lives on the subscription items.
    invoice = current_api_invoice("in_1QmZyBLgUG5tbmjcQ0aB1cD2", "paid")

    response = signed_event_post(anon_client, stripe_event("invoice.paid", invoice))

    assert response.json()["outcome"] == "processed"
    account = reload(current_api_account)
    item = CURRENT_SUBSCRIPTION["items"]["data"][0]
    assert account.plan.slug == "pro"
    assert account.psp_current_period_start == ts(item["current_period_start"])
    assert account.psp_current_period_end == ts(item["current_period_end"])
    reads = {r.path for r in recorded_stripe.requests if r.method == "GET"}
    # The subscription, and the customer's live subscriptions (one live subscription).
    assert reads == {f"/v1/subscriptions/{CURRENT_SUBSCRIPTION['id']}", "/v1/subscriptions"}


def test_a_failed_renewal_records_past_due_and_keeps_the_plan(
    anon_client, recorded_stripe, current_api_account
):
    path = f"/v1/subscriptions/{CURRENT_SUBSCRIPTION['id']}"
    signed_event_post(
        anon_client, stripe_event("customer.subscription.created", CURRENT_SUBSCRIPTION)
    )
    assert reload(current_api_account).psp_subscription_status == "active"
    # The renewal's payment fails: Stripe now has the subscription past_due.
    recorded_stripe.answer("GET", path, {**CURRENT_SUBSCRIPTION, "status": "past_due"})
    invoice = current_api_invoice("in_1QmZyBLgUG5tbmjcFa1led00", "open")

    response = signed_event_post(anon_client, stripe_event("invoice.payment_failed", invoice))

    assert response.json()["outcome"] == "processed"
    account = reload(current_api_account)
    assert (account.plan.slug, account.psp_subscription_status) == ("pro", "past_due")
    assert account.psp_subscription_id == CURRENT_SUBSCRIPTION["id"]


def test_a_change_at_stripe_while_applying_is_caught_after_commit(
    anon_client, recorded_stripe, current_api_account
):
    """The handler reads Stripe before it locks the account, so another handler
    may commit in between; the read after commit puts the account on Stripe's
    latest state."""
    canceled = {**CURRENT_SUBSCRIPTION, "status": "canceled"}
    recorded_stripe.answer_in_turn(
        "GET", f"/v1/subscriptions/{CURRENT_SUBSCRIPTION['id']}", CURRENT_SUBSCRIPTION, canceled
    )

    response = signed_event_post(
        anon_client, stripe_event("customer.subscription.created", CURRENT_SUBSCRIPTION)
    )

    assert response.json()["outcome"] == "processed"
    account = reload(current_api_account)
    assert (account.plan.slug, account.psp_subscription_status) == ("free", "canceled")


def test_a_stripe_outage_records_nothing_so_the_retry_is_processed(
    anon_client, recorded_stripe, current_api_account, monkeypatch
):
    monkeypatch.setattr(psp, "STRIPE_MAX_NETWORK_RETRIES", 0)
    path = f"/v1/subscriptions/{CURRENT_SUBSCRIPTION['id']}"
    recorded_stripe.answer(
        "GET", path, {"error": {"type": "api_error", "message": "boom"}}, status=500
    )
    event = stripe_event("customer.subscription.updated", CURRENT_SUBSCRIPTION)

    assert_envelope(signed_event_post(anon_client, event), 502, "psp_unavailable")
    assert PspEvent.objects.count() == 0
    assert reload(current_api_account).plan.slug == "free"

    recorded_stripe.answer("GET", path, CURRENT_SUBSCRIPTION)
    assert signed_event_post(anon_client, event).json()["outcome"] == "processed"
    assert reload(current_api_account).plan.slug == "pro"


def test_an_incomplete_subscription_does_not_change_the_plan(
    anon_client, recorded_stripe, current_api_account
):
    incomplete = {**CURRENT_SUBSCRIPTION, "status": "incomplete"}
    recorded_stripe.answer("GET", f"/v1/subscriptions/{incomplete['id']}", incomplete)
    response = signed_event_post(
        anon_client, stripe_event("customer.subscription.created", incomplete)
    )
    assert response.json()["outcome"] == "ignored"
    assert reload(current_api_account).plan.slug == "free"


@pytest.mark.parametrize("status", ["unpaid", "incomplete_expired", "canceled"])
def test_ending_statuses_return_the_account_to_free(
    anon_client, recorded_stripe, current_api_account, status
):
    signed_event_post(
        anon_client, stripe_event("customer.subscription.created", CURRENT_SUBSCRIPTION)
    )
    assert reload(current_api_account).plan.slug == "pro"
    ended = {**CURRENT_SUBSCRIPTION, "status": status}
    recorded_stripe.answer("GET", f"/v1/subscriptions/{ended['id']}", ended)

    signed_event_post(anon_client, stripe_event("customer.subscription.updated", ended))

    account = reload(current_api_account)
    assert (account.plan.slug, account.psp_subscription_status) == ("free", status)


@pytest.mark.parametrize("status", ["trialing", "past_due"])
def test_trialing_and_past_due_keep_the_paid_plan(
    anon_client, recorded_stripe, current_api_account, status
):
    live = {**CURRENT_SUBSCRIPTION, "status": status}
    recorded_stripe.answer("GET", f"/v1/subscriptions/{live['id']}", live)
    signed_event_post(anon_client, stripe_event("customer.subscription.updated", live))
    account = reload(current_api_account)
    assert (account.plan.slug, account.psp_subscription_status) == ("pro", status)


@pytest.mark.django_db(transaction=True)
def test_concurrent_deliveries_of_one_event_are_processed_once(recorded_stripe):
    subscription = CURRENT_SUBSCRIPTION
    Plan.objects.filter(slug="pro").update(
        psp_price_id=subscription["items"]["data"][0]["price"]["id"]
    )
    recorded_stripe.answer("GET", f"/v1/subscriptions/{subscription['id']}", subscription)
    account = AccountFactory(psp_customer_id=subscription["customer"])
    event = stripe_event("customer.subscription.updated", subscription)
    barrier = threading.Barrier(4)
    outcomes = []

    def deliver():
        try:
            barrier.wait()
            outcomes.append(psp_event_handle(event=event))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=deliver) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(outcomes) == ["duplicate", "duplicate", "duplicate", "processed"]
    assert PspEvent.objects.filter(id=event["id"]).count() == 1
    assert reload(account).plan.slug == "pro"
