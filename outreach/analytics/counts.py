"""The hourly counters kept on write (docs/analytics.md): each event adds to its hour's
AnalyticsHour rows at the four grains it belongs to (account, campaign, mailbox, step),
in the event's own transaction, in one statement.

Every write is one `INSERT ... SELECT ... ON CONFLICT DO UPDATE` (`upsert_sql`) over a
source query of what happened: (account_id, campaign_id, credential_id, step_key,
simulated, hour, counter, n). The statement spreads each source row over the grains,
sums the rows that meet on one key (so a batch of events is one statement), and adds
to one shard (config/db/counters.py) of each key: an account's hour is a row every send
of the account adds to, and the shards keep concurrent sends from queuing on it.

Where a message is known (a send, an open, a click) the event counts for it: its
campaign, its mailbox, its step. Every other event counts for the enrollment's last
message sent before it (`HITS_SOURCE`); the recount (outreach.analytics.recount) uses
the same source, so both attribute alike.

Lock order: the analytics rows come last in a transaction. Inside a `deferred()` block
(outreach.enrollments.counting() opens one, after its stats rows) the hits are gathered
and written when the block ends, in one statement; the rows of one statement are
written in one order (grain, then key). The statements of the open and the send carry
a CTE of their own (`message_cte`, `SENT_CTE`) as their last write; a click's goes
through `hits_add` (after its stats: the lock order, outreach.enrollments.stats).
"""

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

from django.db import connection

from config.db.counters import counter_shard
from outreach.bounce_types import classify
from outreach.models.analytics import COUNTERS

# The labels a positive reply carries (API.md 21).
POSITIVE_LABELS = ("interested", "meeting_booked")

_GRAINS = (
    "(VALUES (1, 'account'), (2, 'campaign'), (3, 'credential'), (4, 'step')) AS g(ord, grain)"
)


def upsert_sql(source: str) -> str:
    """The statement that adds the rows of `source` (a query of account_id, campaign_id,
    credential_id, step_key, simulated, hour, counter, n; parameter `shard`) to their
    hours at every grain they have: the mailbox's only with a mailbox."""
    sums = ",\n    ".join(
        f"COALESCE(sum(s.n) FILTER (WHERE s.counter = '{name}'), 0)" for name in COUNTERS
    )
    zeros = ", ".join(COUNTERS)
    updates = ", ".join(f"{name} = a.{name} + excluded.{name}" for name in COUNTERS)
    return f"""
INSERT INTO outreach_analyticshour AS a (account_id, hour, grain, campaign_id, credential_id,
    step_key, simulated, shard, {zeros})
SELECT s.account_id, s.hour, g.grain,
    CASE WHEN g.grain IN ('campaign', 'step') THEN s.campaign_id END,
    CASE WHEN g.grain = 'credential' THEN s.credential_id END,
    CASE WHEN g.grain = 'step' THEN s.step_key ELSE '' END,
    s.simulated, %(shard)s,
    {sums}
FROM ({source}) AS s CROSS JOIN {_GRAINS}
WHERE g.grain <> 'credential' OR s.credential_id IS NOT NULL
GROUP BY g.ord, 1, 2, 3, 4, 5, 6, 7
ORDER BY g.ord, 1, 4, 5, 6, 2, 7
ON CONFLICT (account_id, grain, campaign_id, credential_id, step_key, hour, simulated, shard)
DO UPDATE SET {updates}"""  # noqa: S608 - the code's own column names


def _hour(expression: str) -> str:
    # The hour in UTC whatever the session's zone (a zone with a half-hour offset too).
    return f"date_trunc('hour', {expression}, 'UTC')"


# A send recorded by outreach.sending.record_sql's statement (`simulated`: the simulator's
# mailbox sent it): its last write, after `{after}`.
_SENT_SOURCE = """SELECT %(account)s::uuid AS account_id, %(campaign)s::uuid AS campaign_id,
    %(credential)s::uuid AS credential_id, %(step_key)s::text AS step_key,
    %(simulated)s::boolean AS simulated,
    date_trunc('hour', %(now)s::timestamptz, 'UTC') AS hour, 'sent' AS counter, 1 AS n
FROM msg WHERE {after}"""
SENT_CTE = "\nanalytics AS (\n" + upsert_sql(_SENT_SOURCE) + "\n    RETURNING 1\n),"


def message_cte(counter: str, *, source: str, at: str) -> str:
    """A CTE `analytics` that counts `counter` for the message rows of the CTE `source`
    (returning id, account_id, enrollment_id, credential_id, step_key) at `at` (an SQL
    expression): the first open or click of a message, in its statement."""
    rows = f"""SELECT m.account_id, e.campaign_id, m.credential_id, m.step_key,
        COALESCE(c.auth_method = 'simulator', false) AS simulated, {_hour(at)} AS hour,
        '{counter}' AS counter, 1 AS n
    FROM {source} AS m JOIN outreach_enrollment AS e ON e.id = m.enrollment_id
    LEFT JOIN outreach_smtpcredential AS c ON c.id = m.credential_id"""  # noqa: S608
    return f"""
analytics AS (
    {upsert_sql(rows)}
    RETURNING 1
)"""


# The source of hits_add and of the recount: each (enrollment, message or null, time,
# counter, n) counted for the message named, else for the enrollment's last message sent
# at or before the time (its first one when none was), in its campaign's account; a
# bounce refused during the SMTP transaction (at RCPT or DATA: no message was kept) for
# the mailbox and step of its attempt (the claim finished `bounced`).
HITS_SOURCE = """
SELECT k.account_id, e.campaign_id, COALESCE(rc.credential_id, lm.credential_id) AS credential_id,
    COALESCE(rc.step_key, lm.step_key, '') AS step_key,
    COALESCE(c.auth_method = 'simulator', false) AS simulated,
    date_trunc('hour', x.at, 'UTC') AS hour, x.counter, x.n
FROM {hits}
JOIN outreach_enrollment AS e ON e.id = x.enrollment_id
JOIN outreach_campaign AS k ON k.id = e.campaign_id
LEFT JOIN LATERAL (
    SELECT credential_id, step_key FROM outreach_message
    WHERE enrollment_id = e.id AND (x.message_id IS NULL OR id = x.message_id)
    ORDER BY (sent_at <= x.at) DESC, sent_at DESC LIMIT 1
) AS lm ON true
LEFT JOIN LATERAL (
    SELECT a.credential_id, s.key AS step_key FROM outreach_sendclaim AS a
    LEFT JOIN outreach_campaignstep AS s ON s.campaign_id = e.campaign_id AND s.position = a.step
    WHERE x.counter IN ('bounced_hard', 'bounced_soft', 'bounced_block')
        AND a.enrollment_id = e.id AND a.outcome = 'bounced'
    ORDER BY a.claimed_at DESC LIMIT 1
) AS rc ON true
LEFT JOIN outreach_smtpcredential AS c ON c.id = COALESCE(rc.credential_id, lm.credential_id)"""

HITS_UNNEST = (
    "unnest(%(enrollments)s::uuid[], %(messages)s::uuid[], %(ats)s::timestamptz[], "
    "%(counters)s::text[], %(ns)s::integer[]) AS x(enrollment_id, message_id, at, counter, n)"
)
HITS_SQL = upsert_sql(HITS_SOURCE.replace("{hits}", HITS_UNNEST))


@dataclass(frozen=True)
class Hit:
    """One event to count: `counter` (a column of AnalyticsHour) at `at` for the
    enrollment (and its message `message_id`, when the event names one); `n` is -1 to
    take one back (a reply relabelled from positive)."""

    counter: str
    enrollment_id: object
    at: datetime
    message_id: object = None
    n: int = 1


def bounce_counter(bounce_type: str | None, reason: str) -> str:
    """The counter of a bounce: bounced_hard, bounced_soft or bounced_block, by the type
    stored with it (outreach.bounce_types), or read from its reason for a bounce kept
    before types were (its type null)."""
    return f"bounced_{bounce_type or classify(code=None, text=reason).type}"


_local = threading.local()


def hits_add(hits: list[Hit]) -> None:
    """Count these events: at the end of the enclosing `deferred()` block, or now (one
    statement)."""
    unknown = {hit.counter for hit in hits} - set(COUNTERS)
    if unknown:
        raise ValueError(f"not an analytics counter: {', '.join(sorted(unknown))}")
    pending = getattr(_local, "pending", None)
    if pending is not None:
        pending.extend(hits)
    elif hits:
        _write(hits)


def _write(hits: list[Hit]) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            HITS_SQL,
            {
                "enrollments": [hit.enrollment_id for hit in hits],
                "messages": [hit.message_id for hit in hits],
                "ats": [hit.at for hit in hits],
                "counters": [hit.counter for hit in hits],
                "ns": [hit.n for hit in hits],
                "shard": counter_shard(),
            },
        )


@contextmanager
def deferred() -> Iterator[None]:
    """Gather the hits of the block and write them, in one statement, when it ends
    without an error (inside the transaction). Nested blocks write with the outermost."""
    if getattr(_local, "pending", None) is not None:
        yield
        return
    pending: list[Hit] = []
    _local.pending = pending
    try:
        yield
        _local.pending = None
        if pending:
            _write(pending)
    finally:
        _local.pending = None
