"""billing_reconcile: re-reading every account's Stripe subscription, the safety
net for missed notifications."""

import logging
from dataclasses import dataclass

from django.db.models import Q

from accounts.models import Account
from billing import psp
from billing.errors import PspUnavailable
from billing.subscriptions import subscription_sync

logger = logging.getLogger(__name__)


@dataclass
class ReconcileItem:
    """What reconciling one account did. `outcome` is a PspEvent outcome, or
    "psp_unavailable" when Stripe could not be reached for it (then `failed`)."""

    account: Account
    outcome: str
    detail: str
    plan_before: str
    plan_after: str
    changed: bool
    failed: bool


@dataclass
class ReconcileResult:
    checked: int = 0
    changed: int = 0
    failed: int = 0
    # Stripe's live subscriptions could not be listed: accounts that do not know of
    # theirs were not looked at.
    search_failed: bool = False


def subscriptions_reconcile(*, progress=None) -> ReconcileResult:
    """Re-read the Stripe subscription of every account that has one and apply it
    (`subscription_sync`): the safety net for missed notifications. Safe to re-run.

    `progress(index, total, item: ReconcileItem)` is called after each account.
    A Stripe failure for one account is counted and the others still run.
    """
    # The accounts with a subscription, and those whose customer has a live one the
    # account does not know of (a missed notification, a second subscription).
    result = ReconcileResult()
    try:
        customers = psp.customers_with_live_subscriptions()
    except PspUnavailable:
        logger.warning("billing reconcile: Stripe's live subscriptions could not be listed")
        customers = set()
        result.search_failed = True
    accounts = (
        Account.objects.filter(
            (Q(psp_subscription_id__isnull=False) & ~Q(psp_subscription_id=""))
            | Q(psp_customer_id__in=customers)
        )
        .select_related("plan")
        .order_by("created_at", "pk")
    )
    total = accounts.count()
    for index, account in enumerate(accounts.iterator(), start=1):
        result.checked += 1
        before = (account.plan.slug, account.psp_subscription_status)
        try:
            outcome, detail = subscription_sync(account=account)
        except PspUnavailable:
            result.failed += 1
            item = ReconcileItem(
                account, "psp_unavailable", "Stripe unavailable", before[0], before[0], False, True
            )
        else:
            account.refresh_from_db()
            after = (account.plan.slug, account.psp_subscription_status)
            result.changed += before != after
            item = ReconcileItem(
                account, outcome, detail, before[0], after[0], before != after, False
            )
        if progress is not None:
            progress(index, total, item)
    if result.failed:
        logger.warning(
            "billing reconcile: %d of %d account(s) failed (Stripe unavailable)",
            result.failed,
            result.checked,
        )
    return result
