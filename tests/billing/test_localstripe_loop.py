"""The whole loop with localstripe as the Stripe peer: the service creates the
customer there, a subscription created there reaches POST /webhooks/psp over
HTTP with localstripe's own Stripe-Signature, and moves the account to the paid
plan with the subscription's period; deleting it there returns the account to free."""

import time
from datetime import UTC, datetime

import pytest
import requests

from accounts.models import Account
from accounts.services import api_key_create
from billing import psp
from billing.models import PspEvent
from billing.psp_events import INVOICE_EVENTS, SUBSCRIPTION_EVENTS
from plans.models import Plan
from tests.accounts.factories import AccountFactory
from tests.billing.conftest import (
    WEBHOOK_SECRET,
    localstripe_cancel,
    localstripe_card_on_file,
    localstripe_price,
    localstripe_subscribe,
)
from tests.conftest import client_for

WEBHOOK_NAME = "billing-loop"
HANDLED_EVENTS = SUBSCRIPTION_EVENTS | INVOICE_EVENTS


def wait_for(condition, *, timeout: float = 15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError("condition not met in time")


@pytest.fixture
def localstripe_webhook(stripe_settings, live_server):
    """localstripe sends the handled events, signed, to this test's live server
    (as a Stripe endpoint is configured with its enabled events)."""

    def register(url: str):
        requests.post(
            f"{stripe_settings.url}/_config/webhooks/{WEBHOOK_NAME}",
            json={"url": url, "secret": WEBHOOK_SECRET, "events": sorted(HANDLED_EVENTS)},
            timeout=10,
        ).raise_for_status()

    # localstripe sends each event 1 s after it happens, to the webhooks
    # registered then: let earlier tests' events go out before registering.
    time.sleep(1.2)
    register(f"{live_server.url}/webhooks/psp")
    yield stripe_settings
    # localstripe cannot forget a webhook: point it where nothing listens.
    register("http://127.0.0.1:9/webhooks/psp")


@pytest.mark.django_db(transaction=True)
def test_subscription_at_stripe_moves_the_plan_and_back(localstripe_webhook):
    peer = localstripe_webhook
    account = AccountFactory()
    # What signup does when the provider is configured (rule 6).
    account.psp_customer_id = psp.customer_create(
        email=account.email, name=account.name, account_id=str(account.id)
    )
    account.save(update_fields=["psp_customer_id"])
    assert peer.get(f"/v1/customers/{account.psp_customer_id}")["email"] == account.email
    price = localstripe_price(peer, "price_hobby_loop")
    Plan.objects.filter(slug="hobby").update(psp_price_id=price)
    localstripe_card_on_file(peer, account.psp_customer_id)

    subscription = localstripe_subscribe(peer, account.psp_customer_id, price)

    def plan_is(slug):
        return lambda: Account.objects.get(pk=account.pk).plan.slug == slug

    wait_for(plan_is("hobby"))
    client = client_for(api_key_create(account=account, label="loop").plaintext)
    body = client.get("/billing/subscription").json()
    start = datetime.fromtimestamp(subscription["current_period_start"], tz=UTC)
    end = datetime.fromtimestamp(subscription["current_period_end"], tz=UTC)
    assert body["plan"]["slug"] == "hobby"
    assert body["psp_subscription_id"] == subscription["id"]
    assert body["psp_customer_id"] == account.psp_customer_id
    assert body["current_period"]["start"] == start.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert body["current_period"]["end"] == end.strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    localstripe_cancel(peer, subscription["id"])

    wait_for(plan_is("free"))
    assert Account.objects.get(pk=account.pk).psp_subscription_id is None
    outcomes = dict(
        PspEvent.objects.filter(
            type__startswith="customer.subscription.", psp_customer_id=account.psp_customer_id
        ).values_list("type", "outcome")
    )
    assert outcomes == {
        "customer.subscription.created": "processed",
        "customer.subscription.deleted": "processed",
    }
