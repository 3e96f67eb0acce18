"""Reading the counters (docs/analytics.md): a dense series of local dates, one SQL query
whatever the range.

The query reads the one grain the filter names (`Scope`) from both tables: the hour rows
not yet moved into their days (the last hours, and a few late ones), each counted in the
period its hour falls in, and the day rows (outreach.models.analytics.AnalyticsDay), each
cut at the periods' edges that fall inside its UTC day: a piece of hours [lo, hi) of a
day is `c[hi] - c[lo]` of its running sums. So a year reads about 366 day rows, not 8,784
hours. The edges are local midnights (of the first date, and of each day, week's Monday or
month's 1st after it), rounded up to the UTC hour: a zone whose offset is not a whole number
of hours (Asia/Kolkata, +05:30) is approximated to the hour, a UTC hour counting on the
local date its start falls on.
"""

from dataclasses import dataclass
from datetime import date
from uuid import UUID

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


_SUMS = ", ".join(f"sum({name}) AS {name}" for name in COUNTERS)
_FILLED = ", ".join(f"COALESCE(s.{name}, 0)" for name in COUNTERS)
_HOUR = ", ".join(f"h.{name}" for name in COUNTERS)
_PIECE = ", ".join(f"d.{name}[m.hi] - COALESCE(d.{name}[m.lo], 0)" for name in COUNTERS)
# Each grain's key, written so the unique indexes (account, grain, campaign, credential,
# step_key, hour or day, ...) answer it: `IS NULL` and `=`, never `IS NOT DISTINCT FROM`.
_KEYS = {
    "account": "campaign_id IS NULL AND credential_id IS NULL AND step_key = ''",
    "campaign": "campaign_id = %(campaign)s AND credential_id IS NULL AND step_key = ''",
    "step": "campaign_id = %(campaign)s AND credential_id IS NULL AND step_key = %(step_key)s",
    "credential": "campaign_id IS NULL AND credential_id = %(credential)s AND step_key = ''",
}


# The periods of the local dates asked for; the UTC hours each spans, from its first local
# midnight rounded up to the UTC hour (its edges); and the pieces of UTC days between the
# edges: (period, day, lo, hi), the day's hours [lo, hi). The pieces are MATERIALIZED:
# inlined, each of the 44 reads of `lo` and `hi` per day row would compute its zone
# conversion and `extract` again (a year's query took twice as long).
_PERIODS = """
WITH periods AS (
    SELECT date_trunc(%(interval)s, d)::date AS period, min(d)::date AS first,
        max(d)::date + 1 AS after
    FROM generate_series(%(start)s::timestamp, %(end)s::timestamp, interval '1 day') AS d
    GROUP BY 1
),
edges AS (
    SELECT period,
        date_trunc('hour', (first::timestamp AT TIME ZONE %(zone)s)
            + interval '1 hour' - interval '1 microsecond', 'UTC') AS begins,
        date_trunc('hour', (after::timestamp AT TIME ZONE %(zone)s)
            + interval '1 hour' - interval '1 microsecond', 'UTC') AS ends
    FROM periods
),
pieces AS MATERIALIZED (
    SELECT e.period, g::date AS day,
        CASE WHEN g::date = (e.begins AT TIME ZONE 'UTC')::date
            THEN extract(hour FROM e.begins AT TIME ZONE 'UTC')::integer ELSE 0 END AS lo,
        CASE WHEN g::date = (e.ends AT TIME ZONE 'UTC')::date
            THEN extract(hour FROM e.ends AT TIME ZONE 'UTC')::integer ELSE 24 END AS hi
    FROM edges AS e, generate_series(
        (e.begins AT TIME ZONE 'UTC')::date,
        ((e.ends - interval '1 hour') AT TIME ZONE 'UTC')::date,
        interval '1 day'
    ) AS g
)"""
_SERIES = {
    grain: f"""{_PERIODS}
SELECT p.period, {_FILLED}
FROM periods AS p LEFT JOIN (SELECT period, {_SUMS} FROM (
    SELECT e.period, {_HOUR}
    FROM outreach_analyticshour AS h JOIN edges AS e ON h.hour >= e.begins AND h.hour < e.ends
    WHERE h.account_id = %(account)s AND h.grain = %(grain)s AND {key}
        AND h.hour >= (SELECT min(begins) FROM edges) AND h.hour < (SELECT max(ends) FROM edges)
    UNION ALL
    SELECT m.period, {_PIECE}
    FROM pieces AS m JOIN outreach_analyticsday AS d ON d.day = m.day
    WHERE d.account_id = %(account)s AND d.grain = %(grain)s AND {key}
) AS x
GROUP BY period) AS s USING (period)
ORDER BY p.period
"""  # noqa: S608 - the code's own column names
    for grain, key in _KEYS.items()
}


def series_read(*, scope: Scope, start: date, end: date, interval: str, zone: str) -> list[tuple]:
    """The counters of `scope` from `start` to `end` (local dates in `zone`, both
    included), one row per period of `interval` in order, zeros where nothing happened:
    each row (the period's first date, then each counter of COUNTERS in its order).
    One query; the periods (a date, its week's Monday or its month's 1st) are the
    query's own."""
    with connection.cursor() as cursor:
        cursor.execute(
            _SERIES[scope.grain],
            {
                "interval": interval,
                "zone": zone,
                "start": start,
                "end": end,
                "account": scope.account_id,
                "grain": scope.grain,
                "campaign": scope.campaign_id,
                "credential": scope.credential_id,
                "step_key": scope.step_key,
            },
        )
        return cursor.fetchall()
