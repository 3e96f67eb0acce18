"""Folding the shards of past hours into one row (docs/analytics.md, "Shards").

An hour's row of a busy account is written by every send of that hour at once, so it is
kept as up to COUNTER_SHARDS rows (config/db/counters.py). Once the hour has passed,
almost nothing adds to it any more (an event counts in the hour it happens), and its
shards only cost its readers: a year read from eight shards is 70,000 rows instead of
8,760. Beat folds them (`hours_fold`): each statement moves a batch of shard rows of
past hours into their key's shard 0 (DELETE ... RETURNING, then one upsert), so the sums
never change; a late event (a reply labelled positive, counted in the hour it was
received) adds a shard row again, which the next fold takes. The batch is picked with
SKIP LOCKED and its rows are written in the writers' order (grain, then key), so the
fold never waits for a writer's row and a writer waits at most for one batch.
"""

from datetime import datetime

from django.db import connection

from outreach.models.analytics import COUNTERS

_ORDER = (
    "CASE grain WHEN 'account' THEN 1 WHEN 'campaign' THEN 2 WHEN 'credential' THEN 3 "
    "ELSE 4 END, account_id, campaign_id, credential_id, step_key, hour, simulated"
)
_KEY = "account_id, hour, grain, campaign_id, credential_id, step_key, simulated"
FOLD_SQL = f"""
WITH moved AS (
    DELETE FROM outreach_analyticshour WHERE id IN (
        SELECT id FROM outreach_analyticshour
        WHERE shard > 0 AND hour < %(before)s
        ORDER BY hour LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    )
    RETURNING {_KEY}, {", ".join(COUNTERS)}
),
folded AS (
    INSERT INTO outreach_analyticshour AS a ({_KEY}, shard, {", ".join(COUNTERS)})
    SELECT {_KEY}, 0, {", ".join(f"sum({name})" for name in COUNTERS)}
    FROM moved GROUP BY {_KEY}
    ORDER BY {_ORDER}
    ON CONFLICT (account_id, grain, campaign_id, credential_id, step_key, hour, simulated, shard)
    DO UPDATE SET {", ".join(f"{name} = a.{name} + excluded.{name}" for name in COUNTERS)}
    RETURNING 1
)
SELECT (SELECT count(*) FROM moved), (SELECT count(*) FROM folded)
"""  # noqa: S608 - the code's own column names

# Shard rows moved by one statement.
BATCH = 5000


def hours_fold(*, before: datetime, batch: int = BATCH) -> int:
    """Fold the shard rows of the hours before `before` into their shard 0, a batch per
    statement (each its own transaction) until none is left. Returns the rows folded."""
    folded = 0
    while True:
        with connection.cursor() as cursor:
            cursor.execute(FOLD_SQL, {"before": before, "limit": batch})
            moved, _ = cursor.fetchone()
        folded += moved
        if moved < batch:
            return folded
