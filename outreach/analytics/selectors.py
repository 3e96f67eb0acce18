"""Reading the hourly counters (docs/analytics.md): a dense series of local dates,
one SQL query whatever the range.

The query reads the one grain the filter names (`Scope`), the hours from the first
date's local midnight to the one after the last date's, and groups them into local
days, weeks (their Monday) or months (their first day) with `date_trunc` on the hour's
local time. A zone whose offset is not a whole number of hours (Asia/Kolkata,
+05:30) is approximated to the hour: a UTC hour counts on the local date its start
falls on.
"""

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from uuid import UUID
from zoneinfo import ZoneInfo

from django.db import connection

from outreach.models.analytics import COUNTERS, AnalyticsHour

INTERVALS = ("day", "week", "month")


@dataclass(frozen=True)
class Scope:
    """What the series counts: the account's events, or one campaign's, one step's of
    a campaign, or one mailbox's (never a mailbox's in one campaign: no grain keeps
    that, and the API refuses it)."""

    account_id: UUID
    campaign_id: UUID | None = None
    credential_id: UUID | None = None
    step_key: str = ""

    @property
    def grain(self) -> str:
        if self.step_key:
            return AnalyticsHour.Grain.STEP
        if self.campaign_id is not None:
            return AnalyticsHour.Grain.CAMPAIGN
        if self.credential_id is not None:
            return AnalyticsHour.Grain.CREDENTIAL
        return AnalyticsHour.Grain.ACCOUNT


_SUMS = ", ".join(f"sum({name})" for name in COUNTERS)
# Each grain's key, written so the unique index (account, grain, campaign, credential,
# step_key, hour, ...) answers it: `IS NULL` and `=`, never `IS NOT DISTINCT FROM`.
_KEYS = {
    "account": "campaign_id IS NULL AND credential_id IS NULL AND step_key = ''",
    "campaign": "campaign_id = %(campaign)s AND credential_id IS NULL AND step_key = ''",
    "step": "campaign_id = %(campaign)s AND credential_id IS NULL AND step_key = %(step_key)s",
    "credential": "campaign_id IS NULL AND credential_id = %(credential)s AND step_key = ''",
}
_SERIES = {
    grain: f"""
SELECT date_trunc(%(interval)s, hour AT TIME ZONE %(zone)s)::date AS period, {_SUMS}
FROM outreach_analyticshour
WHERE account_id = %(account)s AND grain = %(grain)s AND {key}
  AND hour >= %(start)s AND hour < %(end)s
GROUP BY period
"""  # noqa: S608 - the code's own column names
    for grain, key in _KEYS.items()
}


def period_start(day: date, interval: str) -> date:
    """The first date of the period `day` is in: itself, its week's Monday, its month's 1st."""
    if interval == "week":
        return day - timedelta(days=day.weekday())
    if interval == "month":
        return day.replace(day=1)
    return day


def _next_period(day: date, interval: str) -> date:
    if interval == "week":
        return day + timedelta(days=7)
    if interval == "month":
        return (day.replace(day=28) + timedelta(days=4)).replace(day=1)
    return day + timedelta(days=1)


def _zero_row(day: date) -> dict:
    return {"date": day, **dict.fromkeys(COUNTERS, 0)}


def local_midnight(day: date, zone: ZoneInfo) -> datetime:
    """The instant `day` starts in `zone` (a day that starts in a DST gap: its first
    instant after it, as zoneinfo resolves it)."""
    return datetime.combine(day, time(0), tzinfo=zone)


def series_read(*, scope: Scope, start: date, end: date, interval: str, zone: str) -> list[dict]:
    """The counters of `scope` from `start` to `end` (local dates in `zone`, both
    included), one row per period of `interval`, zeros where nothing happened: each
    row {"date": the period's first date, <counter>: n, ...}. One query."""
    tz = ZoneInfo(zone)
    with connection.cursor() as cursor:
        cursor.execute(
            _SERIES[scope.grain],
            {
                "interval": interval,
                "zone": zone,
                "account": scope.account_id,
                "grain": scope.grain,
                "campaign": scope.campaign_id,
                "credential": scope.credential_id,
                "step_key": scope.step_key,
                "start": local_midnight(start, tz),
                "end": local_midnight(end + timedelta(days=1), tz),
            },
        )
        found = {row[0]: row[1:] for row in cursor.fetchall()}
    rows = []
    day = period_start(start, interval)
    while day <= end:
        row = _zero_row(day)
        for name, value in zip(COUNTERS, found.get(day, ()), strict=False):
            row[name] = int(value or 0)
        rows.append(row)
        day = _next_period(day, interval)
    return rows
