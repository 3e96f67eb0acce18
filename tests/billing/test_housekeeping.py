"""Beat housekeeping: payment provider events pruned past their retention, and the
daily reconcile of every subscription with Stripe (localstripe)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.models import Account
from billing import psp
from billing.models import PspEvent
from billing.tasks import psp_events_prune, subscriptions_reconcile
from plans.models import Plan
from tests.accounts.factories import AccountFactory
from tests.billing.conftest import localstripe_cancel, localstripe_price
from tests.billing.test_reconcile import subscribed_account

pytestmark = pytest.mark.django_db


def _event(event_id: str, *, age: timedelta) -> None:
    PspEvent.objects.create(id=event_id, type="invoice.paid", outcome="ignored", payload={})
    PspEvent.objects.filter(pk=event_id).update(received_at=timezone.now() - age)


def test_events_past_the_retention_are_pruned(settings):
    assert settings.PSP_EVENT_RETENTION_DAYS == 90  # the default
    _event("evt_old", age=timedelta(days=90, minutes=1))
    _event("evt_kept", age=timedelta(days=89, hours=23))
    _event("evt_new", age=timedelta(0))
    assert psp_events_prune.delay().get() == 1
    assert sorted(PspEvent.objects.values_list("id", flat=True)) == ["evt_kept", "evt_new"]
    assert psp_events_prune.delay().get() == 0


def test_the_retention_is_a_setting(settings):
    settings.PSP_EVENT_RETENTION_DAYS = 7
    _event("evt_week", age=timedelta(days=8))
    _event("evt_day", age=timedelta(days=1))
    assert psp_events_prune.delay().get() == 1
    assert list(PspEvent.objects.values_list("id", flat=True)) == ["evt_day"]


def test_both_run_daily_on_beat(settings):
    by_task = {entry["task"]: entry for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert by_task["billing.tasks.psp_events_prune"]["schedule"] == 86400.0
    assert by_task["billing.tasks.subscriptions_reconcile"]["schedule"] == 86400.0


def test_the_daily_reconcile_applies_missed_notifications(stripe_settings):
    peer = stripe_settings
    Plan.objects.filter(slug="hobby").update(psp_price_id=localstripe_price(peer, "price_hk"))
    canceled, subscription = subscribed_account(peer, "price_hk")
    kept, _ = subscribed_account(peer, "price_hk")
    AccountFactory()  # no subscription: not checked
    localstripe_cancel(peer, subscription["id"])  # the notification never arrived

    assert subscriptions_reconcile.delay().get() == {"checked": 2, "changed": 1, "failed": 0}
    assert Account.objects.get(pk=canceled.pk).plan.slug == "free"
    assert Account.objects.get(pk=kept.pk).plan.slug == "hobby"
    # Converged: a re-run checks the one left with a subscription and changes nothing.
    assert subscriptions_reconcile.delay().get() == {"checked": 1, "changed": 0, "failed": 0}


def test_a_stripe_failure_is_counted_and_changes_nothing(settings, monkeypatch):
    monkeypatch.setattr(psp, "STRIPE_MAX_NETWORK_RETRIES", 0)
    settings.STRIPE_SECRET_KEY = "sk_test_x"
    settings.STRIPE_API_BASE = "http://127.0.0.1:1"
    account = AccountFactory(
        psp_subscription_id="sub_x",
        psp_subscription_status="active",
        plan=Plan.objects.get(slug="pro"),
    )
    assert subscriptions_reconcile.delay().get() == {"checked": 1, "changed": 0, "failed": 1}
    assert Account.objects.get(pk=account.pk).plan.slug == "pro"


def test_without_a_payment_provider_the_reconcile_does_nothing(settings):
    settings.STRIPE_SECRET_KEY = ""
    account = AccountFactory(
        psp_subscription_id="sub_x",
        psp_subscription_status="active",
        plan=Plan.objects.get(slug="pro"),
    )
    assert subscriptions_reconcile.delay().get() == {"checked": 0, "changed": 0, "failed": 0}
    assert Account.objects.get(pk=account.pk).plan.slug == "pro"
