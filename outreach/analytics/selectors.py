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


# The periods of the local dates asked for (each as days after `start`: first, after);
# the UTC hours each spans, from its first local midnight rounded up to the UTC hour (its
# edges); and the pieces of UTC days between the edges: (period, day, lo, hi), the day's
# hours [lo, hi). Every hour of the range falls on a UTC day from the day before `start`
# to the day after `end` (no zone is a day away from UTC), so an edge is counted in hours
# from the midnight UTC that starts the day before `start` (`_ORIGIN`): a small positive
# integer whose day and hour are a division and a remainder, where a zone conversion and
# an `extract` each took twice as long. Edges and pieces are MATERIALIZED: inlined, each
# use of `begins`, `ends`, `lo` and `hi` (44 per day row) computed its zone conversion
# again. A period of n local dates spans at most n + 3 UTC days (offsets are under a day),
# so the pieces join a series of a known few numbers (`_SPAN`) rather than calling a
# series per period: the planner then sees a year's 366-730 pieces as few and hashes them,
# not the 1.3 kB day rows.
_ORIGIN = "(%(start)s::date - 1 - date '1970-01-01') * 24"  # its hours since 1970
_SPAN = "CASE %(interval)s WHEN 'day' THEN 3 WHEN 'week' THEN 9 ELSE 33 END"
_PERIODS = f"""
WITH periods AS (
    SELECT date_trunc(%(interval)s, (%(start)s::date + i)::timestamp)::date AS period,
        min(i) AS first, max(i) + 1 AS after
    FROM generate_series(0, %(end)s::date - %(start)s::date) AS i
    GROUP BY 1
),
edges AS MATERIALIZED (
    SELECT period,
        ceil(date_part('epoch', (%(start)s::date + first)::timestamp AT TIME ZONE %(zone)s)
            / 3600)::integer - {_ORIGIN} AS begins,
        ceil(date_part('epoch', (%(start)s::date + after)::timestamp AT TIME ZONE %(zone)s)
            / 3600)::integer - {_ORIGIN} AS ends
    FROM periods
),
pieces AS MATERIALIZED (
    SELECT e.period, %(start)s::date - 1 + e.begins / 24 + k AS day,
        CASE WHEN k = 0 THEN e.begins %% 24 ELSE 0 END AS lo,
        CASE WHEN e.begins / 24 + k = e.ends / 24 THEN e.ends %% 24 ELSE 24 END AS hi
    FROM edges AS e JOIN generate_series(0, {_SPAN}) AS k
        ON e.begins / 24 + k <= (e.ends - 1) / 24
)"""  # noqa: S608 - the code's own expressions
# Both tables are read on the UTC days the range can touch (the comment above), so a
# day's series reads a few rows of its key, not every day it has; an hour row counts in
# the piece of its UTC day that holds its hour, as a day row's hours do.
_SERIES = {
    grain: f"""{_PERIODS}
SELECT p.period, {_FILLED}
FROM periods AS p LEFT JOIN (SELECT period, {_SUMS} FROM (
    SELECT m.period, {_HOUR}
    FROM (
        SELECT *, (date_part('epoch', hour) / 3600)::integer - {_ORIGIN} AS n
        FROM outreach_analyticshour
        WHERE account_id = %(account)s AND grain = %(grain)s AND {key}
            AND hour >= (%(start)s::date - 1)::timestamp AT TIME ZONE 'UTC'
            AND hour < (%(end)s::date + 2)::timestamp AT TIME ZONE 'UTC'
    ) AS h
    JOIN pieces AS m ON m.day = %(start)s::date - 1 + h.n / 24
        AND h.n %% 24 >= m.lo AND h.n %% 24 < m.hi
    UNION ALL
    SELECT m.period, {_PIECE}
    FROM pieces AS m JOIN outreach_analyticsday AS d ON d.day = m.day
    WHERE d.account_id = %(account)s AND d.grain = %(grain)s AND {key}
        AND d.day >= %(start)s::date - 1 AND d.day <= %(end)s::date + 1
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
