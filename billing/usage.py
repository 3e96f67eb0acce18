"""Usage metering: the period's usage record, the per-send increment and the
plan-limit check (docs/billing.md, "Plan limit")."""

import logging
from datetime import datetime

from django.db import IntegrityError, connection, transaction
from django.db.models import Max, Min
from django.utils import timezone

from accounts.models import Account
from billing.errors import PlanLimitReached
from billing.locks import account_lock
from billing.models import UsageRecord
from billing.periods import period_bounds
from billing.sql import USAGE_SHARD_ADD, usage_increment_ctes
from config.db.counters import counter_shard

logger = logging.getLogger(__name__)


# usage_record_increment's statement, run once per metered send: `by` added to one shard of
# the period's record (billing/sql.py), one prepared statement; how many rows of `usage`
# (1, or 0 when the period's record does not exist yet).
USAGE_INCREMENT = f"WITH{usage_increment_ctes(by='%(by)s').rstrip(',')}\nSELECT count(*) FROM usage"


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

    One atomic statement in the common case, so concurrent sends are never lost: it adds
    to one shard of the period's record, drawn at random (config/db/counters.py), and
    makes that shard's row if it is the shard's first send. Only the first send of a
    period goes through usage_record_current to create the record.
    """
    at = at or timezone.now()
    start, end = period_bounds(account, at)
    shard = counter_shard()
    adapt = connection.ops.adapt_datetimefield_value
    account_id = Account._meta.pk.get_db_prep_value(account.pk, connection)
    with connection.cursor() as cursor:
        cursor.execute(
            USAGE_INCREMENT,
            {
                "by": by,
                "account": account_id,
                "now": adapt(at),
                "period_start": adapt(start),
                "period_end": adapt(end),
                "shard": shard,
            },
        )
        (counted,) = cursor.fetchone()
    if counted:
        return
    record = usage_record_current(account=account, at=at)
    record_id = UsageRecord._meta.pk.get_db_prep_value(record.pk, connection)
    with connection.cursor() as cursor:
        cursor.execute(USAGE_SHARD_ADD, {"record": record_id, "shard": shard, "by": by})


def plan_limit_enforce(*, account) -> None:
    """The soft cap (docs/billing.md, "Plan limit"): new dispatches stop at the plan's monthly_limit."""
    record = usage_record_current(account=account)
    limit = account.plan.monthly_limit
    if record.sends_count >= limit:
        raise PlanLimitReached(
            f"This period's {record.sends_count} sends reached the plan limit of {limit}.",
            details={"current_period_sends": record.sends_count, "monthly_limit": limit},
        )


def _record_containing(account, at: datetime) -> UsageRecord | None:
    return (
        UsageRecord.objects.filter(account=account, period_start__lte=at, period_end__gt=at)
        .order_by("-period_start")
        .first()
    )


def _record_settle(*, account, at: datetime, start: datetime, end: datetime) -> UsageRecord:
    """The slow path of usage_record_current: create the period's record, or
    reshape the record in force when the period source changed.

    Runs under a lock on the account row so two processes cannot reshape the same
    records at once.
    """
    for _attempt in range(3):
        try:
            with transaction.atomic():
                account_lock(account.pk)
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
        return _record_create(account=account, start=start, end=end)

    # No record covers `at`: start where the latest earlier record ended, if
    # that is inside this period (the tail of a cancelled subscription's period).
    previous_end = records.filter(period_end__lte=at).aggregate(v=Max("period_end"))["v"]
    if previous_end is not None and previous_end > start:
        start = previous_end
    return _record_create(account=account, start=start, end=end)


def _record_create(*, account, start: datetime, end: datetime) -> UsageRecord:
    """A new record, with its `sends_count` (0), which a created row is not read back
    with: no send has counted in it yet, as no other transaction sees it before this one
    (which holds the account's lock) commits."""
    record = UsageRecord.objects.create(account=account, period_start=start, period_end=end)
    record.sends_count = 0
    return record
