"""manage.py billing_reconcile: every account with a subscription ends where
Stripe (localstripe) says, with progress shown; a re-run changes nothing."""

from io import StringIO

import pytest
from django.core.management import call_command

from accounts.models import Account
from billing import psp
from plans.models import Plan
from tests.accounts.factories import AccountFactory
from tests.billing.conftest import (
    localstripe_cancel,
    localstripe_card_on_file,
    localstripe_change_price,
    localstripe_price,
    localstripe_subscribe,
)

pytestmark = pytest.mark.django_db


def subscribed_account(peer, price: str):
    customer = peer.post("/v1/customers", {"email": "r@example.com"})["id"]
    localstripe_card_on_file(peer, customer)
    subscription = localstripe_subscribe(peer, customer, price)
    account = AccountFactory(
        psp_customer_id=customer,
        psp_subscription_id=subscription["id"],
        psp_subscription_status="active",
        plan=Plan.objects.get(slug="hobby"),
    )
    return account, subscription


def reconcile() -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("billing_reconcile", stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_it_reconciles_missed_notifications_and_is_safe_to_rerun(stripe_settings):
    peer = stripe_settings
    for slug in ["hobby", "pro"]:
        Plan.objects.filter(slug=slug).update(
            psp_price_id=localstripe_price(peer, f"price_{slug}_rc")
        )
    canceled, canceled_sub = subscribed_account(peer, "price_hobby_rc")
    upgraded, upgraded_sub = subscribed_account(peer, "price_hobby_rc")
    untouched = AccountFactory()
    # Notifications that never arrived:
    localstripe_cancel(peer, canceled_sub["id"])
    localstripe_change_price(peer, upgraded_sub, "price_pro_rc")

    out, err = reconcile()

    assert err == ""
    assert "Reconciling 2 account(s) with a subscription." in out
    assert "[1/2]" in out and "[2/2]" in out
    assert "Done: 2 checked, 2 changed, 0 failed" in out
    assert Account.objects.get(pk=canceled.pk).plan.slug == "free"
    upgraded = Account.objects.get(pk=upgraded.pk)
    assert (upgraded.plan.slug, upgraded.psp_current_period_start is not None) == ("pro", True)
    assert Account.objects.get(pk=untouched.pk).plan.slug == "free"

    out, _ = reconcile()
    assert "Done: 1 checked, 0 changed, 0 failed" in out


def test_stripe_failures_are_reported_and_fail_the_command(settings, monkeypatch):
    monkeypatch.setattr(psp, "STRIPE_MAX_NETWORK_RETRIES", 0)
    settings.STRIPE_SECRET_KEY = "sk_test_x"
    settings.STRIPE_API_BASE = "http://127.0.0.1:1"
    account = AccountFactory(
        psp_subscription_id="sub_x",
        psp_subscription_status="active",
        plan=Plan.objects.get(slug="pro"),
    )
    out, err = StringIO(), StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command("billing_reconcile", stdout=out, stderr=err)
    assert exited.value.code == 1
    assert f"[1/1] {account.email}: Stripe unavailable" in err.getvalue()
    assert "Stripe's live subscriptions could not be listed" in err.getvalue()
    assert "1 failed" in out.getvalue()
    assert Account.objects.get(pk=account.pk).plan.slug == "pro"
