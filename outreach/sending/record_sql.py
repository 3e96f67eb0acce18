"""The record of an accepted message on PostgreSQL: one statement, the only form.

`outreach.sending.record.sent_record` writes, in one transaction, the Message row (with
its text as sent), the enrollment's state, the claim finished as its attempt's record,
the mailbox's sent_count (and, for a paced mailbox, its next_send_earliest_at raised to
the send + min_interval_seconds), the per-campaign send count, the period's usage
(billing/sql.py; not for a simulated mailbox's send) and the `enrollment.sent` event
with a delivery job per matching enabled webhook (webhooks.events.event_emit), and the
campaign's `sent` count on a first step (outreach.enrollments), and the hour's analytics
counters (outreach.analytics, its last write). Through the ORM that was about a dozen
statements and a BEGIN/COMMIT pair, and about 8 ms of a worker's CPU per message; here
it is one prepared statement of data-modifying CTEs, in autocommit mode (one statement,
one transaction, committed with the server's normal durability).

Why it stays: a worker's threads share one interpreter lock, so the CPU a message costs
caps how many messages a worker sends per second however many sessions it holds open.
bench/README.md ("Sending to slow servers") measures it under latency.

Every row it adds to is made by the statement when missing (the mailbox's campaign row,
the stats' and the analytics' shards: upserts), except two it cannot make, which the
caller makes before running the same statement again (`Missing`): the period's usage
record (billing.usage.usage_record_current settles the account's records under its lock,
once per period), and the enrollment as intake left it (an enrollment no longer due is
not moved, and its event carries its state: the caller reads it under its row lock and
runs the statement with `moves` false). The final SELECT then raises a marked error and
the statement rolls back whole: nothing is half written. A claim that is not open any
more (the recovery recorded the send) records nothing.

Lock order: the statement's writes wait for each other through their conditions, in the
order every writer of these rows keeps (outreach.enrollments.stats, "Lock order"): the
claim (first, as the recovery locks it), the enrollment, the mailbox, its campaign row,
the usage; the outbox; then the campaign's stats, the step variant's, and the hour's
analytics last. The enrollment's
move, billing's, the outbox's and the stats' writes are their modules' fragments
(outreach/enrollments/transitions.py and stats.py, billing/sql.py, webhooks/sql.py).
"""

import contextlib
import json
import re
import uuid
from dataclasses import dataclass
from datetime import datetime

from django.db import DataError, IntegrityError, connection, transaction
from django.utils import timezone

from billing.sql import USAGE_INCREMENT_CTE
from config.db.counters import counter_shard
from outreach.analytics import SENT_CTE
from outreach.enrollments import SENT_MOVE_CTE, STATS_SENT_CTE, VARIANT_SENT_CTE
from outreach.models.sending import Enrollment, SendClaim
from outreach.sending.message import Outgoing
from webhooks.sql import EVENT_EMIT_CTES, event_params

MARKER = "outreach-record-missing"

# What the statement lacked (`Missing`): the claim (not open any more), the enrollment's
# move (not due any more, or not as the caller read it) or the period's usage record.
CLAIM, MOVED, USAGE = "claim", "moved", "usage"

_SQL = """
WITH
msg AS (
    INSERT INTO outreach_message (id, account_id, enrollment_id, credential_id, step,
        step_key, message_id, to_email, subject, text, variant, sent_at, reply_seen,
        created_at)
    VALUES (%(message_pk)s, %(account)s, %(enrollment)s, %(credential)s, %(step)s,
        %(step_key)s, %(message_id)s, %(to_email)s, %(subject)s, %(text)s, %(variant)s, %(now)s,
        %(reply_seen)s, %(created)s)
    RETURNING 1
),
{moved}
claim AS (
    -- as outreach.sending.attempts.attempt_finish
    UPDATE outreach_sendclaim SET finished_at = %(finished_at)s, outcome = 'sent',
        reply_code = %(reply_code)s, reply_text = %(reply_text)s, outcome_unknown = %(unknown)s,
        duration_ms = %(duration_ms)s, text = ''
    WHERE id = %(claim)s AND finished_at IS NULL RETURNING 1
),
cred AS (
    UPDATE outreach_smtpcredential SET sent_count = sent_count + 1,
        next_send_earliest_at = GREATEST(next_send_earliest_at, %(pace_floor)s)
    WHERE id = %(credential)s RETURNING 1
),
stats_add AS (
    UPDATE outreach_credentialcampaignstats SET sends = sends + 1
    WHERE credential_id = %(credential)s AND campaign_id = %(campaign)s
    RETURNING 1
),
stats AS (
    -- Created by the mailbox's first send in the campaign, as one upsert. Only then: an
    -- upsert locks the row it finds (a WAL record), the UPDATE above does not.
    INSERT INTO outreach_credentialcampaignstats AS s (credential_id, campaign_id, sends, bounces)
    SELECT %(credential)s, %(campaign)s, 1, 0 WHERE NOT EXISTS (SELECT FROM stats_add)
    ON CONFLICT (credential_id, campaign_id) DO UPDATE SET sends = s.sends + 1
    RETURNING 1
),{usage}{event}{campaign_stats}{variant_stats}{analytics}
verdict AS MATERIALIZED (
    -- Computed in this order, which is the lock order (the module's docstring): the claim
    -- first, as a recovery locks it; the enrollment, the mailbox, its campaign row, the
    -- usage; the outbox and the stats after them (their conditions wait for these).
    SELECT (SELECT count(*) FROM claim) AS claim, (SELECT count(*) FROM moved) AS moved,
        (SELECT count(*) FROM cred) AS cred,
        (SELECT count(*) FROM stats) + (SELECT count(*) FROM stats_add) AS stats,
        (SELECT count(*) FROM usage) AS usage
)
SELECT
    -- Not a constant, so PostgreSQL cannot fold the cast at planning time: it fails
    -- (and the whole statement with it) only when a row the record needs is missing.
    CASE WHEN v.claim = 1 AND v.moved = %(moves)s::integer
            AND v.usage = %(metered)s::integer THEN 1
        ELSE CAST(%(marker)s::text || v.claim || v.moved || v.usage AS integer) END,
    ARRAY(SELECT id FROM rung)
FROM verdict AS v
"""
SQL = (
    _SQL.replace("{moved}", SENT_MOVE_CTE)
    .replace("{usage}", USAGE_INCREMENT_CTE)
    .replace("{event}", EVENT_EMIT_CTES)
    .replace(
        "{campaign_stats}",
        STATS_SENT_CTE.replace(
            "{after}", "(SELECT count(*) FROM cred) + (SELECT count(*) FROM rung) >= 0"
        ),
    )
    .replace("{variant_stats}", VARIANT_SENT_CTE)
    .replace("{analytics}", SENT_CTE.replace("{after}", "(SELECT count(*) FROM vstats) >= 0"))
)


# A claim's start mark (mark_started) as one prepared statement: the ORM's UPDATE with a
# joined subquery cost a message about as much as the whole record.
MARK_STARTED = """
UPDATE outreach_sendclaim AS c
SET sending_at = %(now)s, message_id = %(message_id)s, subject = %(subject)s,
    to_email = %(to_email)s, text = %(text)s
FROM outreach_enrollment AS e, outreach_contact AS ct, outreach_campaign AS cp
WHERE c.id = %(claim)s AND c.batch_id = %(batch)s AND c.sending_at IS NULL
  AND c.finished_at IS NULL AND e.id = c.enrollment_id AND e.status = ANY(%(due)s)
  AND ct.id = e.contact_id AND ct.unsubscribed_at IS NULL AND ct.bounced_at IS NULL
  AND cp.id = e.campaign_id AND cp.status = 'active'
"""


def mark_started(claim: SendClaim, outgoing: Outgoing, now: datetime) -> bool:
    """Mark the claim started, with the message it is about to send (the recovery
    records it from these if the worker is lost), if its enrollment is still due, its
    contact not suppressed and its campaign active; whether it was."""
    with connection.cursor() as cursor:
        cursor.execute(
            MARK_STARTED,
            {
                "now": now,
                "message_id": outgoing.message_id,
                "subject": outgoing.subject[:998],
                "to_email": outgoing.to_email[:254],
                "text": outgoing.text,
                "claim": claim.pk,
                "batch": claim.batch_id,
                "due": [str(s) for s in Enrollment.DUE_STATUSES],
            },
        )
        return cursor.rowcount == 1


@dataclass(frozen=True)
class Missing:
    """What kept the statement from applying (CLAIM, MOVED or USAGE): nothing was written."""

    what: str


def record_sent(
    *,
    claim_id: int,
    attempt,
    account_id,
    campaign_id,
    credential_id,
    enrollment_id,
    step: int,
    message_id: str,
    to_email: str,
    subject: str,
    text: str,
    variant: str,
    now: datetime,
    reply_seen: bool,
    moves: bool,
    move: dict,
    keys: list[str],
    note: str,
    pace_floor: datetime | None,
    metered: bool,
    period: tuple[datetime, datetime],
    event_type: str,
    event_data: dict,
) -> list[str] | Missing:
    """Run the statement. Returns the ids of the webhooks whose drain it rang (the caller
    publishes them), or what it lacked (`Missing`: nothing was written). `moves`: the
    enrollment moves by `move` (it must still be due), or (false) is left as it is.
    `metered`: the period's usage counts it (not a simulated send). Outside a
    transaction the statement is its own; inside one (tests, a caller's atomic block) it
    runs in a savepoint."""
    # Long: the statement's named parameters, one per line.
    created = timezone.now()
    params = {
        "message_pk": uuid.uuid4(),
        "claim": claim_id,
        # The attempt (outreach.sending.record.AttemptOutcome), accepted.
        "finished_at": attempt.finished_at or now,
        "reply_code": attempt.code,
        "reply_text": attempt.text,
        "unknown": attempt.unknown,
        "duration_ms": attempt.duration_ms,
        "account": account_id,
        "campaign": campaign_id,
        "credential": credential_id,
        "enrollment": enrollment_id,
        "step": step,
        "first": step == 1,
        "message_id": message_id,
        "to_email": to_email,
        "subject": subject,
        "text": text,
        "variant": variant,
        "now": now,
        "reply_seen": reply_seen,
        # The enrollment's columns after the step (outreach.enrollments.branching.Move).
        "moves": moves,
        "status": move["status"],
        "next_send_at": move["next_send_at"],
        "completed_at": move["completed_at"],
        "current_key": move["current_key"],
        "branch_deadline": move["branch_deadline"],
        "note": note,
        # The step's key (the message's) and the branches the move decided: the path's
        # new keys.
        "step_key": keys[0],
        "path": json.dumps(keys),
        # GREATEST ignores NULL: an unpaced mailbox keeps its value.
        "pace_floor": pace_floor,
        "due": [str(s) for s in Enrollment.DUE_STATUSES],
        "metered": metered,
        "simulated": not metered,
        "period_start": period[0],
        "period_end": period[1],
        # The event's (webhooks' own: event_pk, account, event_type, data, created, stale).
        **event_params(account_id, event_type, event_data, created=created),
        "marker": f"{MARKER}:",
        # The shard of each counter this statement adds to (config/db/counters.py): the
        # period's usage (billing/sql.py), the campaign's and the step variant's stats.
        "shard": counter_shard(),
    }
    # Alone, the statement is its own transaction (one round trip); inside a caller's
    # transaction, a savepoint undoes it when it lacked a row.
    scope = transaction.atomic() if connection.in_atomic_block else contextlib.nullcontext()
    try:
        with scope, connection.cursor() as cursor:
            cursor.execute(SQL, params)
            _ok, rung = cursor.fetchone()
    except DataError as exc:
        found = re.search(MARKER + r":(\d)(\d)(\d)", str(exc))
        if found is None:
            raise
        claimed, moved, _usage = found.groups()
        if claimed != "1":
            return Missing(CLAIM)
        return Missing(MOVED if int(moved) != moves else USAGE)
    except IntegrityError as exc:
        # The message is recorded already: its claim lapsed while the worker was cut
        # off, and the scheduler's recovery recorded it.
        if "message_id_unique" in str(exc):
            return Missing(CLAIM)
        raise
    return [str(webhook_id) for webhook_id in rung]
