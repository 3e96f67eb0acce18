"""The staff dashboard's numbers: a few grouped reads of the account-grain analytics
rows (`grain="account"`, `simulated=False`), each bounded, whatever the platform's volume
(an account has at most 24 rows a day per shard).

Days are UTC days; the window is the last DAYS days, today included. The rates over it:

    bounce rate     bounces (hard + soft + block) / (sends + bounces): a refusal at RCPT
                    is a bounce and not a send (API.md 21), so the attempts are both; the
                    same form as the mailbox list's overall rate
    complaint rate  complaints / sends

An account is over a line when its rate is strictly above it and it made at least
MIN_ATTEMPTS attempts in the window (the auto-disable's minimum, so one bounce of a first
send flags nobody).
"""

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from django.db.models import F, FloatField, Q, QuerySet, Sum
from django.db.models.functions import Cast, Coalesce, NullIf
from django.utils import timezone

from outreach.models.analytics import AnalyticsHour, AnalyticsUtcDay
from outreach.models.campaigns import Campaign
from outreach.sending.bounces import BOUNCE_RATE_MIN_SENDS

DAYS = 30
BUSY_DAYS = 7
BUSIEST_SHOWN = 10
OVER_LINE_SHOWN = 50
MIN_ATTEMPTS = BOUNCE_RATE_MIN_SENDS
# The bounce line: a campaign's default bounce threshold (its mailboxes are disabled
# above it), so an account over it is one whose campaigns would be stopping.
BOUNCE_RATE_LINE_PERCENT: float = Campaign._meta.get_field("bounce_threshold_percent").default
# The complaint line: Gmail's and Yahoo's bulk-sender requirement (spam complaints
# kept under 0.3%).
COMPLAINT_RATE_LINE_PERCENT = 0.3

_BOUNCES = F("bounced_hard") + F("bounced_soft") + F("bounced_block")


@dataclass(frozen=True)
class Day:
    day: date
    sent: int
    bounced: int
    complaints: int


def window_start(now: datetime | None = None) -> datetime:
    """Midnight UTC of the window's first day."""
    today = (now or timezone.now()).astimezone(UTC).date()
    return datetime.combine(today - timedelta(days=DAYS - 1), datetime.min.time(), tzinfo=UTC)


def _platform_days(start: datetime) -> QuerySet[AnalyticsUtcDay]:
    """The accounts' counters per UTC day from `start` (its date), real mailboxes only."""
    return AnalyticsUtcDay.objects.filter(
        grain=AnalyticsHour.Grain.ACCOUNT, simulated=False, day__gte=start.date()
    )


def platform_days(*, start: datetime) -> list[Day]:
    """Sends, bounces and complaints per UTC day across the platform, every day of the
    window (zeros included), oldest first: one query."""
    found: dict[date, Mapping[str, Any]] = {
        row["day"]: row
        for row in _platform_days(start)
        .values("day")
        .annotate(sends=Sum("sent"), bounces=Sum(_BOUNCES), complaint_count=Sum("complaints"))
        .order_by()
    }
    days = [start.date() + timedelta(days=n) for n in range(DAYS)]
    return [
        Day(
            day=day,
            sent=found.get(day, {}).get("sends") or 0,
            bounced=found.get(day, {}).get("bounces") or 0,
            complaints=found.get(day, {}).get("complaint_count") or 0,
        )
        for day in days
    ]


def _per_account(start: datetime) -> QuerySet[Any, Any]:
    """One row per account over the window: `account__email`, its `sends` (and
    `sends_recent`, the last BUSY_DAYS days), `bounces`, `complaint_count`, `attempts` and
    both rates (percent; None without a send)."""
    busy_start = start + timedelta(days=DAYS - BUSY_DAYS)
    return (
        _platform_days(start)
        .values("account_id", "account__email")
        .annotate(
            sends=Sum("sent"),
            sends_recent=Coalesce(Sum("sent", filter=Q(day__gte=busy_start.date())), 0),
            bounces=Sum(_BOUNCES),
            complaint_count=Sum("complaints"),
        )
        .annotate(
            attempts=F("sends") + F("bounces"),
            bounce_rate=100 * Cast("bounces", FloatField()) / NullIf(F("attempts"), 0),
            complaint_rate=100 * Cast("complaint_count", FloatField()) / NullIf(F("sends"), 0),
        )
        .order_by()
    )


def busiest_accounts(*, start: datetime) -> list[dict[str, Any]]:
    """The BUSIEST_SHOWN accounts that sent most in the window, most first: one query."""
    rows = _per_account(start).filter(sends__gt=0).order_by("-sends", "account_id")
    return list(rows[:BUSIEST_SHOWN])


def accounts_over_lines(*, start: datetime) -> list[dict[str, Any]]:
    """The accounts whose bounce or complaint rate is over its line in the window, the
    worst bounce rate first (at most OVER_LINE_SHOWN): one query."""
    rows = (
        _per_account(start)
        .filter(attempts__gte=MIN_ATTEMPTS)
        .filter(
            Q(bounce_rate__gt=BOUNCE_RATE_LINE_PERCENT)
            | Q(complaint_rate__gt=COMPLAINT_RATE_LINE_PERCENT)
        )
        .order_by(
            F("bounce_rate").desc(nulls_last=True),
            F("complaint_rate").desc(nulls_last=True),
            "account_id",
        )
    )
    return list(rows[:OVER_LINE_SHOWN])
