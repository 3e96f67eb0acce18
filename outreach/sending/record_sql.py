"""The record of an accepted message on PostgreSQL: one statement.

`outreach.sending.record.sent_record` writes, in one transaction, the Message row (with
its text as sent), the
enrollment's state, the claim finished as its attempt's record, the mailbox's sent_count (and, for a paced
mailbox, its next_send_earliest_at raised to the send + min_interval_seconds), the per-campaign
send count, the period's usage (billing.usage.usage_record_increment) and the
`enrollment.sent` event with a delivery job per matching enabled webhook
(webhooks.events.event_emit), and the campaign's `sent` count on a first step
(outreach.enrollments), and the hour's analytics counters (outreach.analytics, its last
write). Through the ORM that is about a dozen statements and
a BEGIN/COMMIT pair, and about 8 ms of a worker's CPU per message; here it is one
prepared statement of data-modifying CTEs, in autocommit mode (one statement, one
transaction, committed with the server's normal durability).

Why it stays: a worker's threads share one interpreter lock, so the CPU a message costs
caps how many messages a worker sends per second however many sessions it holds open.
bench/README.md ("Sending to slow servers") measures both paths under latency.

The statement only covers the common case. When the enrollment did not move (intake
changed it since the claim), or the period's usage record does not exist yet (the
per-mailbox campaign stats row it creates itself), its final SELECT raises a marked error, the statement rolls
back whole, and the caller records through the ORM path instead (which creates the
rows, or reloads the enrollment for the event). Nothing is half written. The
enrollment's move, billing's, the outbox's and the stats' writes are their modules'
fragments (outreach/enrollments/transitions.py and stats.py, billing/sql.py,
webhooks/sql.py), and
tests/outreach/test_sending_record.py compares both paths row for row.
"""

import contextlib
import json
import uuid
from datetime import datetime, timedelta

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import DataError, IntegrityError, connection, transaction
from django.utils import timezone

from billing.sql import USAGE_INCREMENT_CTE
from config.db.counters import counter_shard
from outreach.analytics import SENT_CTE
from outreach.enrollments import SENT_MOVE_CTE, STATS_SENT_CTE, VARIANT_SENT_CTE
from outreach.models.sending import Enrollment
from webhooks.sql import EVENT_EMIT_CTES

FALLBACK_MARKER = "outreach-record-fallback"

_SQL = """
WITH
msg AS (
    INSERT INTO outreach_message (id, account_id, enrollment_id, credential_id, step,
        step_key, message_id, to_email, subject, text, variant, sent_at, reply_seen,
        created_at)
    VALUES (%(message_pk)s, %(account)s, %(enrollment)s, %(credential)s, %(step)s,
        %(step_key)s, %(message_id)s, %(to_email)s, %(subject)s, %(text)s, %(variant)s, %(now)s, true,
        %(created)s)
    RETURNING 1
),
{moved}
claim AS (
    -- outreach.sending.record.attempt_finish
    UPDATE outreach_sendclaim SET finished_at = %(finished_at)s, outcome = 'sent',
        reply_code = %(reply_code)s, reply_text = %(reply_text)s, outcome_unknown = false,
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
    -- Created by the mailbox's first send in the campaign (the ORM path's savepoint
    -- INSERT, as one upsert): a fleet's first round would otherwise take that path once
    -- per mailbox. Only then: an upsert locks the row it finds (a WAL record), the
    -- UPDATE above does not.
    INSERT INTO outreach_credentialcampaignstats AS s (credential_id, campaign_id, sends, bounces)
    SELECT %(credential)s, %(campaign)s, 1, 0 WHERE NOT EXISTS (SELECT FROM stats_add)
    ON CONFLICT (credential_id, campaign_id) DO UPDATE SET sends = s.sends + 1
    RETURNING 1
),{usage}{event}{campaign_stats}{variant_stats}{analytics}
verdict AS MATERIALIZED (
    -- Computed in this order, which is the lock order of the same writes through the ORM
    -- and of a bounce (the enrollment, the mailbox, its campaign row, the usage; the
    -- outbox and the campaign's stats after them, outreach.enrollments).
    SELECT (SELECT count(*) FROM moved) AS moved, (SELECT count(*) FROM cred) AS cred,
        (SELECT count(*) FROM stats) + (SELECT count(*) FROM stats_add) AS stats,
        (SELECT count(*) FROM usage) AS usage
)
SELECT
    -- Not a constant, so PostgreSQL cannot fold the cast at planning time: it fails
    -- (and the whole statement with it) only when a row the fast path needs is missing.
    CASE WHEN v.moved = 1 AND v.cred = 1 AND v.stats = 1 AND v.usage = 1 THEN 1
        ELSE CAST(%(marker)s::text || v.moved || v.cred || v.stats || v.usage AS integer) END,
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


# A claim's start mark (outreach.sending.record.claim_mark_started) as one prepared
# statement: the ORM's UPDATE with a joined subquery cost a message about as much as the
# whole record.
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


def mark_started(*, claim_id, batch_id, now, message_id, subject, to_email, text) -> bool:
    """Mark a claim started (see outreach.sending.record.claim_mark_started); whether it was."""
    with connection.cursor() as cursor:
        cursor.execute(
            MARK_STARTED,
            {
                "now": now,
                "message_id": message_id,
                "subject": subject,
                "to_email": to_email,
                "text": text,
                "claim": claim_id,
                "batch": batch_id,
                "due": [str(s) for s in Enrollment.DUE_STATUSES],
            },
        )
        return cursor.rowcount == 1


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
    move: dict,
    keys: list[str],
    pace_floor: datetime | None,
    period: tuple[datetime, datetime],
    event_type: str,
    event_data: dict,
) -> list[str] | None:
    """Run the statement. Returns the ids of the webhooks whose drain it rang (the caller
    publishes them), or None when the common case does not apply: nothing was written,
    record through the ORM. Outside a transaction the statement is its own; inside one
    (tests, a caller's atomic block) it runs in a savepoint."""
    # Long: the statement's named parameters, one per line.
    created = timezone.now()
    params = {
        "message_pk": uuid.uuid4(),
        "claim": claim_id,
        # The attempt (outreach.sending.record.AttemptOutcome), accepted.
        "finished_at": attempt.finished_at or now,
        "reply_code": attempt.code,
        "reply_text": attempt.text,
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
        # The enrollment's columns after the step (outreach.enrollments.branching.Move).
        "status": move["status"],
        "next_send_at": move["next_send_at"],
        "completed_at": move["completed_at"],
        "current_key": move["current_key"],
        "branch_deadline": move["branch_deadline"],
        # The step's key (the message's) and the branches the move decided: the path's
        # new keys.
        "step_key": keys[0],
        "path": json.dumps(keys),
        # GREATEST ignores NULL: an unpaced mailbox keeps its value.
        "pace_floor": pace_floor,
        "due": [str(s) for s in Enrollment.DUE_STATUSES],
        "period_start": period[0],
        "period_end": period[1],
        "event_pk": uuid.uuid4(),
        "event_type": event_type,
        "data": json.dumps(event_data, cls=DjangoJSONEncoder),
        "created": created,
        "stale": created - timedelta(seconds=settings.WEBHOOK_CLAIM_LEASE_SECONDS),
        "marker": f"{FALLBACK_MARKER}:",
        # The shard of each counter this statement adds to (config/db/counters.py): the
        # period's usage (billing/sql.py), the campaign's and the step variant's stats.
        "shard": counter_shard(),
    }
    # Alone, the statement is its own transaction (one round trip); inside a caller's
    # transaction, a savepoint keeps the fallback possible.
    scope = transaction.atomic() if connection.in_atomic_block else contextlib.nullcontext()
    try:
        with scope, connection.cursor() as cursor:
            cursor.execute(SQL, params)
            _ok, rung = cursor.fetchone()
    except DataError as exc:
        if FALLBACK_MARKER in str(exc):
            return None
        raise
    except IntegrityError as exc:
        # The message is recorded already: its claim lapsed while the worker was cut
        # off, and the scheduler's recovery recorded it. The ORM path finds the claim
        # finished and records nothing.
        if "message_id_unique" in str(exc):
            return None
        raise
    return [str(webhook_id) for webhook_id in rung]
