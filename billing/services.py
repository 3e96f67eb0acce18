"""Billing writes: usage metering, the plan-limit check, and keeping an account's
plan and period in step with its Stripe subscription."""

import hashlib
import logging
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import F, Max, Min, Q
from django.utils import timezone

from accounts.models import Account
from billing import psp
from billing.models import CheckoutSession, PspEvent, UsageRecord
from billing.periods import ACTIVE_SUBSCRIPTION_STATUSES, period_bounds
from config.api.errors import (
    AlreadySubscribed,
    CheckoutInProgress,
    NoPspCustomer,
    PlanLimitReached,
    PlanNotFound,
    PlanNotPurchasable,
    PspUnavailable,
)
from config.db.prepared import prepared
from plans.models import FREE_PLAN_SLUG, Plan

logger = logging.getLogger(__name__)

# usage_record_increment's statement, run once per metered send: the ORM's
# filter(...).update(sends_count=F(...) + by), written out once so that it can be a
# prepared statement on PostgreSQL.
USAGE_INCREMENT = prepared(
    "UPDATE billing_usagerecord SET sends_count = sends_count + %s"
    " WHERE account_id = %s AND period_start <= %s"
    " AND period_start >= %s AND period_end = %s"
)

# Subscription statuses that end the paid plan: the account goes back to free.
# `paused` (a trial ended without a payment method) is not paying either.
ENDED_SUBSCRIPTION_STATUSES = frozenset({"canceled", "unpaid", "incomplete_expired", "paused"})
# How long a hosted checkout stays payable (Stripe's minimum is 30 minutes). While it
# is open the account cannot start another one.
CHECKOUT_SESSION_MINUTES = 30
# A checkout claim still "creating" after this long belongs to a request that died.
CHECKOUT_CLAIM_STALE_SECONDS = 120


# --- Usage ------------------------------------------------------------------


def usage_record_current(*, account, at: datetime | None = None) -> UsageRecord:
    """The usage record of the period containing `at` (now), created on first use.

    An account's records never overlap, so every send is counted exactly once.
    When the period source changes (a subscription starts or ends mid-period),
    the record in force is cut short where the new period begins; see
    docs/billing.md "Usage periods".
    """
    at = at or timezone.now()
    start, end = period_bounds(account, at)
    record = _record_containing(account, at)
    if record is not None and record.period_start >= start and record.period_end == end:
        return record
    return _record_settle(account=account, at=at, start=start, end=end)


def usage_record_increment(*, account, at: datetime | None = None, by: int = 1) -> None:
    """Meter `by` sends in the current period.

    One atomic UPDATE in the common case, so concurrent sends are never lost;
    only the first send of a period goes through usage_record_current to create
    the record.
    """
    at = at or timezone.now()
    start, end = period_bounds(account, at)
    # The ORM's filter(account, period_start__lte=at, period_start__gte=start,
    # period_end=end).update(sends_count=F(...) + by), written out once (USAGE_INCREMENT):
    # it runs once per metered send.
    adapt = connection.ops.adapt_datetimefield_value
    account_id = Account._meta.pk.get_db_prep_value(account.pk, connection)
    with connection.cursor() as cursor:
        cursor.execute(USAGE_INCREMENT, [by, account_id, adapt(at), adapt(start), adapt(end)])
        updated = cursor.rowcount
    if updated:
        return
    record = usage_record_current(account=account, at=at)
    UsageRecord.objects.filter(pk=record.pk).update(sends_count=F("sends_count") + by)


def plan_limit_enforce(*, account) -> None:
    """The soft cap of SPEC.md rule 11: new dispatches stop at the plan's monthly_limit."""
    record = usage_record_current(account=account)
    limit = account.plan.monthly_limit
    if record.sends_count >= limit:
        raise PlanLimitReached(
            f"This period's {record.sends_count} sends reached the plan limit of {limit}.",
            details={"current_period_sends": record.sends_count, "monthly_limit": limit},
        )


def _account_lock(account_pk) -> Account:
    """Lock the account row for this transaction.

    FOR NO KEY UPDATE on PostgreSQL: it serializes billing writers of the
    account without blocking inserts that reference the account (their foreign
    key check takes KEY SHARE), such as the per-request counting. Never held
    across a call to Stripe.
    """
    return Account.objects.select_for_update(no_key=True).get(pk=account_pk)


def _record_containing(account, at: datetime) -> UsageRecord | None:
    return (
        UsageRecord.objects.filter(account=account, period_start__lte=at, period_end__gt=at)
        .order_by("-period_start")
        .first()
    )


def _record_settle(*, account, at: datetime, start: datetime, end: datetime) -> UsageRecord:
    """The slow path of usage_record_current: create the period's record, or
    reshape the record in force when the period source changed.

    Runs under a lock on the account row (PostgreSQL; SQLite serializes writers)
    so two processes cannot reshape the same records at once.
    """
    for _attempt in range(3):
        try:
            with transaction.atomic():
                _account_lock(account.pk)
                return _record_settle_locked(account=account, at=at, start=start, end=end)
        except IntegrityError:
            # Another process created the record between our read and insert.
            continue
    record = _record_containing(account, at)
    if record is None:
        raise RuntimeError(f"no usage record for account {account.pk} at {at.isoformat()}")
    return record


def _record_settle_locked(*, account, at: datetime, start: datetime, end: datetime) -> UsageRecord:
    records = UsageRecord.objects.filter(account=account)
    # A record created later (never in practice: records are made for "now")
    # bounds the new one from above.
    next_start = records.filter(period_start__gt=at).aggregate(v=Min("period_start"))["v"]
    if next_start is not None:
        end = min(end, next_start)

    current = _record_containing(account, at)
    if current is not None:
        if current.period_start >= start:
            # Same period, different end (a renewal moved it, or the record was
            # opened under the calendar rule): stretch or shrink it to the period.
            if current.period_end != end:
                current.period_end = end
                current.save(update_fields=["period_end"])
            return current
        # The record began before this period: it ends where this period starts.
        current.period_end = start
        current.save(update_fields=["period_end"])
        return UsageRecord.objects.create(account=account, period_start=start, period_end=end)

    # No record covers `at`: start where the latest earlier record ended, if
    # that is inside this period (the tail of a cancelled subscription's period).
    previous_end = records.filter(period_end__lte=at).aggregate(v=Max("period_end"))["v"]
    if previous_end is not None and previous_end > start:
        start = previous_end
    return UsageRecord.objects.create(account=account, period_start=start, period_end=end)


# --- Checkout and portal ----------------------------------------------------


def _return_url(status: str) -> str:
    """BILLING_RETURN_URL with `status=<status>` added to whatever query it has."""
    parts = urlsplit(settings.BILLING_RETURN_URL)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "status"]
    query.append(("status", status))
    return urlunsplit(parts._replace(query=urlencode(query)))


def _stripe_idempotency_key(
    operation: str, *, account, client_key: str | None, fingerprint: str
) -> str:
    """The idempotency key sent to Stripe.

    Derived from the client's Idempotency-Key when there is one, so a retry
    whose first attempt reached Stripe but never got its answer back gets the
    same session; a fresh one otherwise (Stripe recommends a new Checkout
    Session per attempt).
    """
    if not client_key:
        return f"{operation}-{uuid.uuid4()}"
    digest = hashlib.sha256(f"{account.pk}\n{client_key}\n{fingerprint}".encode()).hexdigest()
    return f"{operation}-{digest[:48]}"


PLAN_NOT_PURCHASABLE_MESSAGES = {
    "private": "The plan {slug!r} is private and cannot be purchased.",
    "archived": "The plan {slug!r} is archived and cannot be purchased.",
    "free": "The plan {slug!r} is free and cannot be purchased.",
    "unpriced": (
        "The plan {slug!r} has no Stripe price yet, so it cannot be purchased: the "
        "operator sets its price id (the plan's psp_price_id in the admin)."
    ),
}


def plan_unpurchasable_reason(plan) -> str | None:
    """Why checkout refuses `plan`, or None. A plan without a price is `free` on tier 0
    and `unpriced` above it: a paid plan whose Stripe price is not configured."""
    if not plan.public:
        return "private"
    if plan.is_archived:
        return "archived"
    if not plan.is_paid:
        return "free" if plan.tier == 0 else "unpriced"
    return None


def checkout_session_start(*, account, plan_slug: str, client_key: str | None = None) -> str:
    """Start a hosted Checkout for a public, paid, non-archived plan; returns its URL."""
    plan = Plan.objects.filter(slug=plan_slug).first()
    if plan is None:
        raise PlanNotFound(f"No plan has the slug {plan_slug!r}.")
    reason = plan_unpurchasable_reason(plan)
    if reason:
        raise PlanNotPurchasable(
            PLAN_NOT_PURCHASABLE_MESSAGES[reason].format(slug=plan.slug),
            details={"reason": reason},
        )
    if not account.psp_customer_id:
        raise NoPspCustomer()
    if account.psp_subscription_id:
        # Set while the subscription lives (active, trialing, past_due, or a later status
        # of it short of ending); cleared when it ends. Plan changes go through the portal.
        raise AlreadySubscribed(
            f"The account already has a subscription ({account.psp_subscription_status}); "
            "change or cancel it in the billing portal."
        )
    _checkout_sessions_settle(account=account)
    # The claim: at most one session per account is being created or open (a partial
    # unique constraint), so two concurrent checkouts cannot both reach Stripe.
    try:
        with transaction.atomic():
            claim = CheckoutSession.objects.create(
                account=account, plan_slug=plan.slug, status=CheckoutSession.Status.CREATING
            )
    except IntegrityError:
        raise CheckoutInProgress(
            "Another checkout of this account is being created; use its page or retry shortly."
        ) from None
    expires_at = timezone.now() + timedelta(minutes=CHECKOUT_SESSION_MINUTES)
    try:
        session = psp.checkout_session_create(
            customer_id=account.psp_customer_id,
            price_id=plan.psp_price_id,
            account_id=str(account.pk),
            success_url=_return_url("success"),
            cancel_url=_return_url("cancel"),
            idempotency_key=_stripe_idempotency_key(
                "checkout", account=account, client_key=client_key, fingerprint=plan.psp_price_id
            ),
            expires_at=int(expires_at.timestamp()),
        )
    except BaseException:
        claim.delete()
        raise
    claim.psp_session_id = session["id"]
    claim.url = session["url"]
    claim.expires_at = _timestamp(session["expires_at"]) or expires_at
    claim.status = CheckoutSession.Status.OPEN
    claim.save(update_fields=["psp_session_id", "url", "expires_at", "status"])
    return session["url"]


def _checkout_sessions_settle(*, account) -> None:
    """Bring the account's unfinished checkouts up to date, refusing a new one while
    one is still open (its page can still start a subscription) or has just completed
    (its subscription's notification is on its way)."""
    now = timezone.now()
    stale = now - timedelta(seconds=CHECKOUT_CLAIM_STALE_SECONDS)
    unfinished = CheckoutSession.objects.filter(
        account=account,
        status__in=[CheckoutSession.Status.CREATING, CheckoutSession.Status.OPEN],
    )
    for session in unfinished:
        if session.status == CheckoutSession.Status.CREATING:
            if session.created_at < stale:  # its request died between the claim and Stripe
                session.status = CheckoutSession.Status.FAILED
                session.save(update_fields=["status"])
                continue
            raise CheckoutInProgress(
                "Another checkout of this account is being created; retry shortly."
            )
        status = "expired" if session.expires_at and session.expires_at <= now else None
        if status is None:
            status = psp.checkout_session_status(session.psp_session_id) or "expired"
        if status == "open":
            raise CheckoutInProgress(
                "A checkout of this account is still open: complete it at its url, or wait "
                "until it expires.",
                details={
                    "url": session.url,
                    "plan_slug": session.plan_slug,
                    "expires_at": session.expires_at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
                    if session.expires_at
                    else None,
                },
            )
        session.status = (
            CheckoutSession.Status.COMPLETE
            if status == "complete"
            else CheckoutSession.Status.EXPIRED
        )
        session.save(update_fields=["status"])
        if status == "complete" and psp.subscriptions_live(account.psp_customer_id):
            raise AlreadySubscribed(
                "A checkout of this account has just completed; its subscription is being "
                "set up. Change or cancel it in the billing portal."
            )


def portal_session_start(*, account, client_key: str | None = None) -> str:
    """Open a Billing Portal session for the account's customer; returns its URL."""
    if not account.psp_customer_id:
        raise NoPspCustomer()
    return psp.portal_session_create(
        customer_id=account.psp_customer_id,
        return_url=settings.BILLING_RETURN_URL,
        idempotency_key=_stripe_idempotency_key(
            "portal", account=account, client_key=client_key, fingerprint=""
        ),
    )


# --- Subscription state -----------------------------------------------------


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


def _object_id(value) -> str | None:
    """A Stripe reference: an id string, or an expanded object with an id."""
    if isinstance(value, str):
        return value or None
    if isinstance(value, dict):
        return value.get("id") or None
    return None


def _timestamp(value) -> datetime | None:
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
    price_id = _object_id(item.get("price")) or _object_id(item.get("plan"))
    if price_id is None:
        price_id = _object_id(subscription.get("plan"))
    start = item.get("current_period_start", subscription.get("current_period_start"))
    end = item.get("current_period_end", subscription.get("current_period_end"))
    return SubscriptionState(
        id=subscription.get("id") or "",
        customer_id=_object_id(subscription.get("customer")) or "",
        status=subscription.get("status") or "",
        price_id=price_id,
        period_start=_timestamp(start),
        period_end=_timestamp(end),
        created=_timestamp(subscription.get("created")),
    )


def subscription_apply(*, account: Account, state: SubscriptionState) -> tuple[str, str]:
    """Put the account where its subscription says (API.md section 3).

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


def _live_states(customer_id: str) -> list[SubscriptionState]:
    if not customer_id:
        return []
    return [subscription_state(s) for s in psp.subscriptions_live(customer_id)]


def _duplicates_cancel(*, account_pk, duplicates: list[SubscriptionState]) -> list[str]:
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


def _cancelled_note(cancelled: list[str]) -> str:
    return f"; cancelled duplicate {', '.join(cancelled)}" if cancelled else ""


def subscription_sync(*, account: Account) -> tuple[str, str]:
    """Re-read the account's subscriptions from Stripe and apply them (reconcile): the
    one it has, and any other live one of its customer (cancelling the newer ones)."""
    subscription_id = account.psp_subscription_id
    live = _live_states(account.psp_customer_id or "")
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
    with transaction.atomic():
        locked = _account_lock(account.pk)
        outcome, detail = subscription_apply(account=locked, state=target)
    cancelled = _duplicates_cancel(account_pk=account.pk, duplicates=duplicates)
    _subscription_settle(account_pk=account.pk, applied=target)
    return outcome, detail + _cancelled_note(cancelled)


def _subscription_settle(*, account_pk, applied: SubscriptionState) -> None:
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
            live = _live_states(applied.customer_id)
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
            subscription_apply(account=_account_lock(account_pk), state=target)
        _duplicates_cancel(account_pk=account_pk, duplicates=duplicates)
        applied = target


def account_plan_assign(*, account: Account, plan: Plan) -> None:
    """Staff put an account on a plan by hand (private plans included).

    A later subscription notification for the account overrides it.
    """
    Account.objects.filter(pk=account.pk).update(plan=plan)
    account.plan = plan
    logger.info("account %s assigned plan %s by staff", account.pk, plan.slug)


# --- Provider notifications -------------------------------------------------

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
    found = _object_id(invoice.get("subscription"))
    if found:
        return found
    parent = invoice.get("parent")
    if isinstance(parent, dict):
        details = parent.get("subscription_details")
        if isinstance(details, dict):
            return _object_id(details.get("subscription"))
    return None


def psp_event_handle(*, event: dict) -> str:
    """Handle one verified Stripe event; returns the outcome recorded for it.

    Each event id is recorded once: a repeat returns "duplicate" and changes
    nothing. The event's payload is not trusted for state: the subscription is
    re-read from Stripe, applied under a lock on the account row, and checked
    again after commit (_subscription_settle), so events handled in any order,
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

    if event_type not in SUBSCRIPTION_EVENTS | INVOICE_EVENTS:
        return _psp_event_record(
            **record, outcome=PspEvent.Outcome.IGNORED, detail="unhandled type"
        )

    customer_id = _object_id(obj.get("customer")) or ""
    if event_type in SUBSCRIPTION_EVENTS:
        subscription_id = _object_id(obj.get("id"))
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

    # Stripe is read before any lock is taken; a failure here records nothing,
    # so Stripe's retry of the event is processed.
    subscription = psp.subscription_retrieve(subscription_id)
    live = _live_states(customer_id)
    with transaction.atomic():
        account = _account_lock(account.pk)
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
        cancelled = _duplicates_cancel(account_pk=account.pk, duplicates=duplicates)
        PspEvent.objects.filter(pk=event_id).update(
            detail=(detail + _cancelled_note(cancelled))[:500]
        )
    if applied is not None and subscription is not None:
        _subscription_settle(account_pk=account.pk, applied=applied)
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


# --- Housekeeping -------------------------------------------------------------


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


def psp_events_prune(*, now: datetime | None = None) -> int:
    """Delete payment provider events received more than PSP_EVENT_RETENTION_DAYS ago.
    Returns how many. (Stripe retries a notification for 3 days at most, so a pruned
    id cannot come back as a duplicate that should have been ignored.)"""
    now = now or timezone.now()
    cutoff = now - timedelta(days=settings.PSP_EVENT_RETENTION_DAYS)
    deleted, _ = PspEvent.objects.filter(received_at__lt=cutoff).delete()
    return deleted
