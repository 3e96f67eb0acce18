"""Stripe notifications: each verified event recorded once and applied by
re-reading the subscription it names."""

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.models import Account
from billing import psp
from billing.locks import account_lock
from billing.models import PspEvent
from billing.periods import ACTIVE_SUBSCRIPTION_STATUSES
from billing.subscriptions import (
    SubscriptionState,
    cancelled_note,
    duplicates_cancel,
    live_states,
    stripe_object_id,
    subscription_apply,
    subscription_choose,
    subscription_settle,
    subscription_state,
)

logger = logging.getLogger(__name__)

SUBSCRIPTION_EVENTS = frozenset(
    {
        "customer.subscription.created",
        "customer.subscription.updated",
        "customer.subscription.deleted",
    }
)
INVOICE_EVENTS = frozenset({"invoice.paid", "invoice.payment_failed"})


def _invoice_subscription_id(invoice: dict) -> str | None:
    """The invoice's subscription: top-level before API 2025-03-31, under
    parent.subscription_details since."""
    found = stripe_object_id(invoice.get("subscription"))
    if found:
        return found
    parent = invoice.get("parent")
    if isinstance(parent, dict):
        details = parent.get("subscription_details")
        if isinstance(details, dict):
            return stripe_object_id(details.get("subscription"))
    return None


def _psp_event_account(*, record: dict, obj: dict) -> tuple[Account, str] | str:
    """The account and subscription id an event is about, adding the ids it names to
    `record`; or, for an event that concerns no subscription of an account of ours,
    the outcome recorded for it."""
    event_id, event_type = record["id"], record["type"]
    if event_type not in SUBSCRIPTION_EVENTS | INVOICE_EVENTS:
        return _psp_event_record(
            **record, outcome=PspEvent.Outcome.IGNORED, detail="unhandled type"
        )

    customer_id = stripe_object_id(obj.get("customer")) or ""
    if event_type in SUBSCRIPTION_EVENTS:
        subscription_id = stripe_object_id(obj.get("id"))
    else:
        subscription_id = _invoice_subscription_id(obj)
    record.update(psp_customer_id=customer_id, psp_subscription_id=subscription_id or "")
    if not customer_id or not subscription_id:
        logger.warning("psp event %s (%s) names no customer or subscription", event_id, event_type)
        return _psp_event_record(
            **record,
            outcome=PspEvent.Outcome.UNMAPPED
            if event_type in SUBSCRIPTION_EVENTS
            else PspEvent.Outcome.IGNORED,
            detail="no customer or subscription in the event",
        )
    account = Account.objects.filter(psp_customer_id=customer_id).first()
    if account is None:
        logger.warning(
            "psp event %s (%s) for unknown customer %s", event_id, event_type, customer_id
        )
        return _psp_event_record(
            **record,
            outcome=PspEvent.Outcome.UNKNOWN_CUSTOMER,
            detail="no account has this customer",
        )
    return account, subscription_id


def psp_event_handle(*, event: dict) -> str:
    """Handle one verified Stripe event; returns the outcome recorded for it.

    Each event id is recorded once: a repeat returns "duplicate" and changes
    nothing. The event's payload is not trusted for state: the subscription is
    re-read from Stripe, applied under a lock on the account row, and checked
    again after commit (subscription_settle), so events handled in any order,
    even concurrently, end in Stripe's current state. A Stripe failure while
    re-reading raises PspUnavailable and records nothing, so Stripe's retry of
    the event is processed.
    """
    event_id, event_type = event["id"], event["type"]
    if PspEvent.objects.filter(pk=event_id).exists():
        return "duplicate"
    data = event.get("data")
    obj = data.get("object") if isinstance(data, dict) else None
    obj = obj if isinstance(obj, dict) else {}
    record = {"id": event_id, "type": event_type, "payload": event}

    found = _psp_event_account(record=record, obj=obj)
    if isinstance(found, str):
        return found
    account, subscription_id = found
    customer_id = record["psp_customer_id"]

    # Stripe is read before any lock is taken; a failure here records nothing,
    # so Stripe's retry of the event is processed.
    subscription = psp.subscription_retrieve(subscription_id)
    live = live_states(customer_id)
    with transaction.atomic():
        account = account_lock(account.pk)
        try:
            with transaction.atomic():
                row = PspEvent.objects.create(
                    **record, account=account, outcome=PspEvent.Outcome.PROCESSED
                )
        except IntegrityError:
            return "duplicate"  # A concurrent delivery of the same event won.
        outcome, detail, applied, duplicates = _psp_event_apply(
            account=account,
            event_type=event_type,
            obj=obj,
            subscription_id=subscription_id,
            subscription=subscription,
            live=live,
        )
        if outcome == PspEvent.Outcome.UNMAPPED:
            logger.warning("psp event %s (%s) not mapped: %s", event_id, event_type, detail)
        row.outcome, row.detail = outcome, detail[:500]
        row.save(update_fields=["outcome", "detail"])
    if duplicates:
        cancelled = duplicates_cancel(account_pk=account.pk, duplicates=duplicates)
        PspEvent.objects.filter(pk=event_id).update(
            detail=(detail + cancelled_note(cancelled))[:500]
        )
    if applied is not None and subscription is not None:
        subscription_settle(account_pk=account.pk, applied=applied)
    return outcome


def _psp_event_apply(
    *,
    account: Account,
    event_type: str,
    obj: dict,
    subscription_id: str,
    subscription: dict | None,
    live: list[SubscriptionState],
) -> tuple[str, str, SubscriptionState | None, list[SubscriptionState]]:
    """Apply the re-read subscription, or the one live subscription the account keeps
    (subscription_choose); returns (outcome, detail, state applied, live subscriptions
    to cancel)."""
    if subscription is None:
        if event_type == "customer.subscription.deleted":
            # Stripe no longer has it at all: it has certainly ended.
            state = subscription_state({**obj, "status": "canceled"})
            target, duplicates = subscription_choose(
                state=state, live=live, current_id=account.psp_subscription_id
            )
            return (*subscription_apply(account=account, state=target), None, duplicates)
        return (
            PspEvent.Outcome.UNMAPPED,
            f"Stripe does not know subscription {subscription_id}",
            None,
            [],
        )
    state = subscription_state(subscription)
    if state.customer_id and state.customer_id != account.psp_customer_id:
        return PspEvent.Outcome.UNMAPPED, "the subscription belongs to another customer", None, []
    # Every event, invoice.payment_failed included, applies the subscription as Stripe
    # has it now: a failed renewal has made it past_due (the plan stays while Stripe
    # retries), and a failure notification arriving after the payment recovered
    # finds it active again and leaves the account so. With another live subscription
    # of the customer, the older one is kept and the newer cancelled.
    target, duplicates = subscription_choose(
        state=state, live=live, current_id=account.psp_subscription_id
    )
    if (
        target.id != state.id
        and target.id == account.psp_subscription_id
        and state.status not in ACTIVE_SUBSCRIPTION_STATUSES
    ):
        # Another subscription ended while the account's own goes on: nothing to do.
        return (*subscription_apply(account=account, state=state), None, duplicates)
    outcome, detail = subscription_apply(account=account, state=target)
    if target.id != state.id:
        detail = f"{detail} (kept {target.id}; {state.id} is {state.status})"
    return outcome, detail, target, duplicates


def _psp_event_record(**fields) -> str:
    try:
        with transaction.atomic():
            PspEvent.objects.create(**fields)
    except IntegrityError:
        return "duplicate"
    return fields["outcome"]


def psp_events_prune(*, now: datetime | None = None) -> int:
    """Delete payment provider events received more than PSP_EVENT_RETENTION_DAYS ago.
    Returns how many. (Stripe retries a notification for 3 days at most, so a pruned
    id cannot come back as a duplicate that should have been ignored.)"""
    now = now or timezone.now()
    cutoff = now - timedelta(days=settings.PSP_EVENT_RETENTION_DAYS)
    deleted, _ = PspEvent.objects.filter(received_at__lt=cutoff).delete()
    return deleted
