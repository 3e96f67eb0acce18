"""billing's usage increment in SQL: the CTEs that add to the period's count, for the one
statement that records an accepted message (outreach/sending/record_sql.py,
USAGE_INCREMENT_CTE) and for usage_record_increment's own statement (billing/usage.py),
from the same text.

The count is kept in shards (billing.models.UsageCount, config/db/counters.py): the
CTEs add to one shard of the record of the current period. Parameters: account, now,
period_start, period_end (the record: usage_record_current's for that period) and shard
(counter_shard()). The CTE `usage` returns one row when it counted, none when the
period's record does not exist yet (the caller then has billing.usage.usage_record_current
create it, and runs its statement again)."""

# The period's record: the account's record that begins in the period, not after the
# send, and ends with it (usage_record_current's, when the period's record exists).
_RECORD_OF_THE_PERIOD = """r.account_id = %(account)s AND r.period_start <= %(now)s
        AND r.period_start >= %(period_start)s AND r.period_end = %(period_end)s"""


# Two writers that both found no row of the shard: the second adds to the first's row.
_SHARD_CONFLICT = "ON CONFLICT (record_id, shard) DO UPDATE SET sends = c.sends + excluded.sends"


def usage_increment_ctes(*, by: str, when: str = "true") -> str:
    """CTEs `usage_add`, `usage_new` and `usage`: `by` (SQL: a constant or a parameter)
    added to the record's shard when the SQL condition `when` holds. The shard's row is updated, and made (an upsert) only
    when the update found none: an upsert that finds the row locks it first, a WAL
    record of its own, where an UPDATE writes only the new version. `usage` is one row
    when either counted."""
    return f"""
usage_add AS (
    UPDATE billing_usagecount AS c SET sends = c.sends + {by}
    FROM billing_usagerecord AS r
    WHERE c.record_id = r.id AND c.shard = %(shard)s AND {when}
        AND {_RECORD_OF_THE_PERIOD}
    RETURNING 1
),
usage_new AS (
    INSERT INTO billing_usagecount AS c (record_id, shard, sends)
    SELECT r.id, %(shard)s, {by} FROM billing_usagerecord AS r
    WHERE {_RECORD_OF_THE_PERIOD}
        AND {when} AND NOT EXISTS (SELECT FROM usage_add)
    {_SHARD_CONFLICT}
    RETURNING 1
),
usage AS (
    SELECT 1 FROM usage_add UNION ALL SELECT 1 FROM usage_new
),"""  # noqa: S608 - the code's own SQL, `by` from this app


# In the statement that records a message: 1 send, when it is metered (parameter
# `metered`: not a simulated mailbox's send).
USAGE_INCREMENT_CTE = usage_increment_ctes(by="1", when="%(metered)s")

# A record's shard added to by the record's primary key, its row made when missing
# (parameters: record, shard, by): usage_record_increment's fallback, after it made the
# period's record, once per period.
USAGE_SHARD_ADD = f"""
INSERT INTO billing_usagecount AS c (record_id, shard, sends)
VALUES (%(record)s, %(shard)s, %(by)s) {_SHARD_CONFLICT}"""  # noqa: S608 - the code's own SQL
