"""billing's usage increment as an SQL fragment, for the one statement that records an
accepted message (outreach/sending/record_sql.py). It is usage_record_increment's UPDATE for
a record of the current period, and must change with it
(tests/outreach/test_sending_record.py compares both paths row for row). Parameters:
account, now, period_start, period_end. It returns one row when it counted, none when
the period's record does not exist yet (the caller then goes through the service,
which creates it)."""

USAGE_INCREMENT_CTE = """
usage AS (
    UPDATE billing_usagerecord SET sends_count = sends_count + 1
    WHERE account_id = %(account)s AND period_start <= %(now)s
      AND period_start >= %(period_start)s AND period_end = %(period_end)s
    RETURNING 1
),"""
