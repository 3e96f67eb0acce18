"""SQL fragments of billing's writes, for callers that must do them inside a single
statement (the sending engine's one-round-trip record: outreach/record_sql.py).

Each fragment is the same write as its service, and must change with it:

- USAGE_INCREMENT_CTE = billing.services.usage_record_increment for an existing record
  of the current period. Parameters: account, now, period_start, period_end. It
  returns one row when it counted, none when the period's record does not exist yet
  (the caller then goes through the service, which creates it).
- USAGE_INCREMENT is the service's own statement (the same UPDATE, by `by`), prepared
  on PostgreSQL: it runs once per metered send.
"""

from config.db.prepared import prepared

USAGE_INCREMENT = prepared(
    "UPDATE billing_usagerecord SET sends_count = sends_count + %s"
    " WHERE account_id = %s AND period_start <= %s"
    " AND period_start >= %s AND period_end = %s"
)

USAGE_INCREMENT_CTE = """
usage AS (
    UPDATE billing_usagerecord SET sends_count = sends_count + 1
    WHERE account_id = %(account)s AND period_start <= %(now)s
      AND period_start >= %(period_start)s AND period_end = %(period_end)s
    RETURNING 1
),"""
