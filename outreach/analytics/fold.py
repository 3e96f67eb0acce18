"""Moving past hours into their days (docs/analytics.md, "Hours and days").

An hour's row of a busy account is written by every send of that hour at once, so it is
kept as up to COUNTER_SHARDS rows (config/db/counters.py). Once the hour has passed,
almost nothing adds to it any more (an event counts in the hour it happens), and its rows
only cost their readers: a year of one key is 8,784 hours, each on a page of its own. Beat
moves them (`hours_fold`): each statement deletes a batch of hour rows of past hours (any
shard) and adds them to their key's AnalyticsDay row of the UTC day, whose arrays hold the
running sums through the day's hours (outreach.models.analytics), so the totals never
change and a count is always in exactly one of the two tables. A late event (a reply
labelled positive, counted in the hour it was received) makes an hour row again, which
the next fold moves. The batch is picked with SKIP LOCKED and its days are written in the
writers' order (grain, then key), so the fold never waits for a writer's row, a writer
waits at most for one batch, and two folds at once (two beats) take different rows.
"""

from datetime import datetime

from django.db import connection

from outreach.models.analytics import COUNTERS

_ORDER = (
    "CASE grain WHEN 'account' THEN 1 WHEN 'campaign' THEN 2 WHEN 'credential' THEN 3 "
    "ELSE 4 END, account_id, campaign_id, credential_id, step_key, day, simulated"
)
_KEY = "account_id, grain, campaign_id, credential_id, step_key, simulated"


def _running(name: str) -> str:
    # The moved hours' running sums through the day: element k, the hours before k + 1.
    sums = ", ".join(
        f"COALESCE(sum({name}) FILTER (WHERE h <= {k}), 0)::integer" for k in range(24)
    )
    return f"ARRAY[{sums}]"


def _added(name: str) -> str:
    pairs = f"unnest(a.{name}, excluded.{name}) WITH ORDINALITY AS u(x, y, i)"
    return f"{name} = ARRAY(SELECT x + y FROM {pairs} ORDER BY i)"  # noqa: S608 - a column


FOLD_SQL = f"""
WITH moved AS (
    DELETE FROM outreach_analyticshour WHERE id IN (
        SELECT id FROM outreach_analyticshour
        WHERE hour < %(before)s
        ORDER BY hour LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    )
    RETURNING {_KEY}, (hour AT TIME ZONE 'UTC')::date AS day,
        extract(hour FROM hour AT TIME ZONE 'UTC')::integer AS h, {", ".join(COUNTERS)}
),
days AS (
    INSERT INTO outreach_analyticsday AS a ({_KEY}, day, {", ".join(COUNTERS)})
    SELECT {_KEY}, day, {", ".join(_running(name) for name in COUNTERS)}
    FROM moved GROUP BY {_KEY}, day
    ORDER BY {_ORDER}
    ON CONFLICT (account_id, grain, campaign_id, credential_id, step_key, day, simulated)
    DO UPDATE SET {", ".join(_added(name) for name in COUNTERS)}
    RETURNING 1
)
SELECT (SELECT count(*) FROM moved), (SELECT count(*) FROM days)
"""  # noqa: S608 - the code's own column names

# Hour rows moved by one statement.
BATCH = 5000


def hours_fold(*, before: datetime, batch: int = BATCH) -> int:
    """Move the hour rows of the hours before `before` into their days, a batch per
    statement (each its own transaction) until none is left. Returns the rows moved."""
    folded = 0
    while True:
        with connection.cursor() as cursor:
            cursor.execute(FOLD_SQL, {"before": before, "limit": batch})
            moved, _ = cursor.fetchone()
        folded += moved
        if moved < batch:
            return folded
