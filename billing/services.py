from datetime import datetime

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from billing.models import UsageRecord
from billing.periods import period_bounds
from config.api.errors import PlanLimitReached


def usage_record_current(*, account, at: datetime | None = None) -> UsageRecord:
    """The usage record of the period containing `at` (now), created on first use."""
    at = at or timezone.now()
    start, end = period_bounds(account, at)
    record = UsageRecord.objects.filter(account=account, period_start=start).first()
    if record is not None:
        return record
    try:
        with transaction.atomic():
            return UsageRecord.objects.create(account=account, period_start=start, period_end=end)
    except IntegrityError:
        # Another process created it between our read and insert.
        return UsageRecord.objects.get(account=account, period_start=start)


def usage_record_increment(*, account, at: datetime | None = None, by: int = 1) -> None:
    """Meter `by` sends in the current period: one atomic UPDATE, never lost under concurrency."""
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
