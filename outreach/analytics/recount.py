"""Rebuilding an account's hourly counters from the messages and events kept
(`manage.py analytics_recount`, docs/analytics.md): for the data from before the
counters were kept on write, and to repair them.

Each counter is recounted from what keeps it: sent, opened, clicked from the messages
(sent_at, opened_at, clicked_at); replied, unsubscribed and the bounces from the
enrollments (replied_at, unsubscribed_at, bounced_at and the bounce's stored type, or its
reason for one kept before types were: `bounce_counter`); positive replies from the replies labelled so (at their
received_at); responses from the responses sent. Each is attributed as on write
(outreach.analytics.counts.HITS_SOURCE). Complaints are kept as counted: nothing else
records one. The account's days (the hours beat moved) are zeroed with its hours; the
recounted events land in hour rows, which the next fold moves into the days again.

An account's recount is one transaction that first locks the counters' table against
writes (SHARE ROW EXCLUSIVE): every event committed before it is in the recount, every
later one waits and adds to it after, none is counted twice or lost. Sends wait while
it runs, so it goes account by account.
"""

from django.db import connection, transaction

from config.db.counters import counter_shard
from outreach.analytics.counts import (
    HITS_SOURCE,
    HITS_UNNEST,
    POSITIVE_LABELS,
    bounce_counter,
    upsert_sql,
)
from outreach.models.analytics import COUNTERS

_KEPT = ("complaints",)

# Every counter but the bounces (typed in Python) and the complaints, for one account.
_EVENTS = """(
    SELECT m.enrollment_id, m.id AS message_id, m.sent_at AS at, 'sent' AS counter, 1 AS n
    FROM outreach_message AS m WHERE m.account_id = %(account)s
    UNION ALL
    SELECT m.enrollment_id, m.id, m.opened_at, 'opened', 1
    FROM outreach_message AS m WHERE m.account_id = %(account)s AND m.opened_at IS NOT NULL
    UNION ALL
    SELECT m.enrollment_id, m.id, m.clicked_at, 'clicked', 1
    FROM outreach_message AS m WHERE m.account_id = %(account)s AND m.clicked_at IS NOT NULL
    UNION ALL
    SELECT e.id, NULL::uuid, e.replied_at, 'replied', 1
    FROM outreach_enrollment AS e JOIN outreach_campaign AS k ON k.id = e.campaign_id
    WHERE k.account_id = %(account)s AND e.replied_at IS NOT NULL
    UNION ALL
    SELECT e.id, NULL::uuid, e.unsubscribed_at, 'unsubscribed', 1
    FROM outreach_enrollment AS e JOIN outreach_campaign AS k ON k.id = e.campaign_id
    WHERE k.account_id = %(account)s AND e.unsubscribed_at IS NOT NULL
    UNION ALL
    SELECT r.enrollment_id, NULL::uuid, r.received_at, 'positive_replies', 1
    FROM outreach_reply AS r
    WHERE r.account_id = %(account)s AND r.label = ANY(%(positive)s)
        AND r.enrollment_id IS NOT NULL
    UNION ALL
    SELECT s.enrollment_id, NULL::uuid, s.sent_at, 'responses', 1
    FROM outreach_replyresponse AS s
    WHERE s.account_id = %(account)s AND s.status = 'sent' AND s.sent_at IS NOT NULL
) AS x"""
EVENTS_SQL = upsert_sql(HITS_SOURCE.replace("{hits}", _EVENTS))
BOUNCES_SQL = upsert_sql(HITS_SOURCE.replace("{hits}", HITS_UNNEST))

_ZERO = ", ".join(f"{name} = 0" for name in COUNTERS if name not in _KEPT)
_ZERO_DAYS = ", ".join(
    f"{name} = array_fill(0, ARRAY[24])" for name in COUNTERS if name not in _KEPT
)

# Bounces read and typed this many at a time.
_BATCH = 5000


def analytics_recount(*, account_id, skip_bounce_reasons: tuple[str, ...] = ()) -> None:
    """Rebuild one account's counters (module docstring). `skip_bounce_reasons`: the
    reasons of enrollments ended `bounced` without a bounce of their own (the contact
    bounced elsewhere): not bounces of theirs."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("LOCK TABLE outreach_analyticshour IN SHARE ROW EXCLUSIVE MODE")
        cursor.execute(
            f"UPDATE outreach_analyticshour SET {_ZERO} WHERE account_id = %s",  # noqa: S608
            [account_id],
        )
        # The fold writes days after taking hours: it waits for the lock above.
        cursor.execute(
            f"UPDATE outreach_analyticsday SET {_ZERO_DAYS} WHERE account_id = %s",  # noqa: S608
            [account_id],
        )
        cursor.execute(
            EVENTS_SQL,
            {"account": account_id, "positive": list(POSITIVE_LABELS), "shard": counter_shard()},
        )
        _bounces_recount(cursor, account_id, skip_bounce_reasons)


def _bounces_recount(cursor, account_id, skip: tuple[str, ...]) -> None:
    with connection.chunked_cursor() as rows:
        rows.execute(
            """SELECT e.id, e.bounced_at, e.bounce_reason, e.bounce_type
            FROM outreach_enrollment AS e
            JOIN outreach_campaign AS k ON k.id = e.campaign_id
            WHERE k.account_id = %s AND e.bounced_at IS NOT NULL
                AND NOT (e.bounce_reason = ANY(%s))""",
            [account_id, list(skip)],
        )
        while batch := rows.fetchmany(_BATCH):
            cursor.execute(
                BOUNCES_SQL,
                {
                    "enrollments": [row[0] for row in batch],
                    "messages": [None] * len(batch),
                    "ats": [row[1] for row in batch],
                    "counters": [bounce_counter(row[3], row[2] or "") for row in batch],
                    "ns": [1] * len(batch),
                    "shard": counter_shard(),
                },
            )
