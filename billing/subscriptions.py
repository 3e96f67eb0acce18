"""Keeping an account's plan and period in step with its Stripe subscription:
reading a subscription, applying it, choosing among live ones, and re-reading
Stripe (sync, settle)."""

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import overload

from django.db import transaction

from accounts.models import Account
from billing import psp
from billing.errors import PspUnavailable
from billing.locks import account_lock
from billing.models import PspEvent
from billing.periods import ACTIVE_SUBSCRIPTION_STATUSES
from plans.models import FREE_PLAN_SLUG, Plan

logger = logging.getLogger(__name__)

# Subscription statuses that end the paid plan: the account goes back to free.
# `paused` (a trial ended without a payment method) is not paying either.
ENDED_SUBSCRIPTION_STATUSES = frozenset({"canceled", "unpaid", "incomplete_expired", "paused"})


@dataclass(frozen=True)
class SubscriptionState:
    """What the service needs of a Stripe subscription, whatever its API version."""

    id: str
    customer_id: str
    status: str
    price_id: str | None
    period_start: datetime | None
    period_end: datetime | None
    created: datetime | None = None


def stripe_object_id(value) -> str | None:
    """A Stripe reference: an id string, or an expanded object with an id."""
    if isinstance(value, str):
        return value or None
    if isinstance(value, dict):
        return value.get("id") or None
    return None


def stripe_timestamp(value) -> datetime | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return datetime.fromtimestamp(value, tz=UTC)
    return None


def subscription_state(subscription: dict) -> SubscriptionState:
    """Read a subscription object of any Stripe API version.

    The price: item.price.id, falling back to the legacy item.plan.id. The
    period: the item's current_period_start/_end (API versions since
    2025-03-31), falling back to the subscription-level fields of older ones.
    The first item is the one that counts: checkout sells one price.
    """
    items = subscription.get("items")
    data = items.get("data") if isinstance(items, dict) else items
    item = data[0] if isinstance(data, list) and data else {}
    price_id = stripe_object_id(item.get("price")) or stripe_object_id(item.get("plan"))
    if price_id is None:
        price_id = stripe_object_id(subscription.get("plan"))
    start = item.get("current_period_start", subscription.get("current_period_start"))
    end = item.get("current_period_end", subscription.get("current_period_end"))
    return SubscriptionState(
        id=subscription.get("id") or "",
        customer_id=stripe_object_id(subscription.get("customer")) or "",
        status=subscription.get("status") or "",
        price_id=price_id,
        period_start=stripe_timestamp(start),
        period_end=stripe_timestamp(end),
        created=stripe_timestamp(subscription.get("created")),
    )


def subscription_apply(*, account: Account, state: SubscriptionState) -> tuple[str, str]:
    """Put the account where its subscription says (docs/billing.md, "GET /billing/subscription").

    Returns (outcome, detail). The caller holds the account row locked.
    - active, trialing, past_due: the plan whose psp_price_id is the
      subscription's price, with the subscription's period;
    - canceled, unpaid, incomplete_expired, paused: back to free, but only if
      it is the account's current subscription (an old one ending must not undo
      a newer one, nor a staff-assigned plan);
    - anything else (incomplete: the first payment has not gone through): the
      status is recorded if it is the current subscription, the plan stays.
    """
    fields = [
        "plan",
        "psp_subscription_id",
        "psp_subscription_status",
        "psp_current_period_start",
        "psp_current_period_end",
    ]
    if state.status in ACTIVE_SUBSCRIPTION_STATUSES:
        plan = Plan.objects.filter(psp_price_id=state.price_id).first() if state.price_id else None
        if plan is None:
            return PspEvent.Outcome.UNMAPPED, f"no plan has the price {state.price_id!r}"
        account.plan = plan
        account.psp_subscription_id = state.id
        account.psp_subscription_status = state.status
        account.psp_current_period_start = state.period_start
        account.psp_current_period_end = state.period_end
        account.save(update_fields=fields)
        return PspEvent.Outcome.PROCESSED, f"plan {plan.slug}, {state.status}"

    if account.psp_subscription_id != state.id:
        return (
            PspEvent.Outcome.IGNORED,
            f"subscription {state.id} ({state.status}) is not the account's current one",
        )
    if state.status in ENDED_SUBSCRIPTION_STATUSES:
        account.plan = Plan.objects.get(slug=FREE_PLAN_SLUG)
        account.psp_subscription_id = None
        account.psp_subscription_status = state.status
        account.psp_current_period_start = None
        account.psp_current_period_end = None
        account.save(update_fields=fields)
        return PspEvent.Outcome.PROCESSED, f"plan free, subscription {state.status}"
    account.psp_subscription_status = state.status
    account.save(update_fields=["psp_subscription_status"])
    return PspEvent.Outcome.PROCESSED, f"status {state.status}, plan unchanged"


@overload
def subscription_choose(
    *, state: SubscriptionState, live: list[SubscriptionState], current_id: str | None
) -> tuple[SubscriptionState, list[SubscriptionState]]: ...
@overload
def subscription_choose(
    *, state: None, live: list[SubscriptionState], current_id: str | None
) -> tuple[SubscriptionState | None, list[SubscriptionState]]: ...
def subscription_choose(
    *, state: SubscriptionState | None, live: list[SubscriptionState], current_id: str | None
) -> tuple[SubscriptionState | None, list[SubscriptionState]]:
    """The subscription the account follows, and the live ones to cancel.

    An account has at most one live subscription. When Stripe reports several (two
    checkouts completed), the oldest is kept (the account's current one on a tie) and
    the newer ones are cancelled. `state` is the subscription an event names, as just
    re-read; `live` the customer's live subscriptions as listed. With none live,
    `state` itself is followed (an ended one takes the account back to free when it is
    the current one).
    """
    by_id = {s.id: s for s in live if s.status in ACTIVE_SUBSCRIPTION_STATUSES}
    if state is not None:
        by_id.pop(state.id, None)
        if state.status in ACTIVE_SUBSCRIPTION_STATUSES:
            by_id[state.id] = state
    if not by_id:
        return state, []
    oldest = datetime.max.replace(tzinfo=UTC)
    keep = min(
        by_id.values(),
        key=lambda s: (s.created or oldest, s.id != current_id, s.id),
    )
    return keep, [s for s in by_id.values() if s.id != keep.id]


def live_states(customer_id: str) -> list[SubscriptionState]:
    if not customer_id:
        return []
    return [subscription_state(s) for s in psp.subscriptions_live(customer_id)]


def duplicates_cancel(*, account_pk, duplicates: list[SubscriptionState]) -> list[str]:
    """Cancel the newer live subscriptions at Stripe; returns the ids cancelled. A
    failure is logged and left to the next notification or reconcile."""
    cancelled = []
    for duplicate in duplicates:
        try:
            psp.subscription_cancel(duplicate.id)
        except PspUnavailable:
            logger.warning(
                "account %s: could not cancel duplicate subscription %s", account_pk, duplicate.id
            )
            continue
        logger.warning(
            "account %s: cancelled subscription %s, a second live subscription",
            account_pk,
            duplicate.id,
        )
        cancelled.append(duplicate.id)
    return cancelled


def cancelled_note(cancelled: list[str]) -> str:
    return f"; cancelled duplicate {', '.join(cancelled)}" if cancelled else ""


def subscription_sync(*, account: Account) -> tuple[str, str]:
    """Re-read the account's subscriptions from Stripe and apply them (reconcile): the
    one it has, and any other live one of its customer (cancelling the newer ones)."""
    subscription_id = account.psp_subscription_id
    live = live_states(account.psp_customer_id or "")
    state = None
    if subscription_id:
        subscription = psp.subscription_retrieve(subscription_id)
        if subscription is not None:
            state = subscription_state(subscription)
    if state is None and not live:
        if subscription_id:
            return (
                PspEvent.Outcome.UNMAPPED,
                f"Stripe does not know subscription {subscription_id}",
            )
        return PspEvent.Outcome.IGNORED, "no subscription"
    target, duplicates = subscription_choose(state=state, live=live, current_id=subscription_id)
    assert target is not None  # a state, or a live one to follow: ruled out above otherwise
    with transaction.atomic():
        locked = account_lock(account.pk)
        outcome, detail = subscription_apply(account=locked, state=target)
    cancelled = duplicates_cancel(account_pk=account.pk, duplicates=duplicates)
    subscription_settle(account_pk=account.pk, applied=target)
    return outcome, detail + cancelled_note(cancelled)


def subscription_settle(*, account_pk, applied: SubscriptionState) -> None:
    """Read the subscriptions again after applying one, and apply again if Stripe
    moved meanwhile.

    Stripe is never called with a database lock held, so two handlers can read
    Stripe in one order and commit in the other. Whichever commits last reads
    Stripe after its commit here, so the account always ends on Stripe's latest
    state. A failure here changes nothing: the event is applied and recorded,
    and billing_reconcile is the safety net.
    """
    for _attempt in range(2):
        try:
            fresh = psp.subscription_retrieve(applied.id)
            live = live_states(applied.customer_id)
        except PspUnavailable:
            logger.warning("could not re-check subscription %s after applying it", applied.id)
            return
        state = subscription_state(fresh) if fresh is not None else None
        current_id = (
            Account.objects.filter(pk=account_pk)
            .values_list("psp_subscription_id", flat=True)
            .first()
        )
        target, duplicates = subscription_choose(state=state, live=live, current_id=current_id)
        if target is None or (target == applied and not duplicates):
            return
        with transaction.atomic():
            subscription_apply(account=account_lock(account_pk), state=target)
        duplicates_cancel(account_pk=account_pk, duplicates=duplicates)
        applied = target


def account_plan_assign(*, account: Account, plan: Plan) -> None:
    """Staff put an account on a plan by hand (private plans included).

    A later subscription notification for the account overrides it.
    """
    Account.objects.filter(pk=account.pk).update(plan=plan)
    account.plan = plan
    logger.info("account %s assigned plan %s by staff", account.pk, plan.slug)
