"""The record of an accepted message on PostgreSQL: one statement, one round trip.

`outreach.sending._record_sent` writes, in one transaction, the Message row, the
enrollment's state, the claim's deletion, the mailbox's sent_count, the per-campaign
send count, the period's usage (billing.services.usage_record_increment), the
`enrollment.sent` event with a delivery job per matching enabled webhook
(webhooks.services.event_emit), and optionally the next claim's start mark. Through
the ORM that is about fifteen statements and a BEGIN/COMMIT pair per message.

Here the same writes are one statement of data-modifying CTEs, run in autocommit
mode: PostgreSQL makes a single statement one transaction, committed durably (no
`synchronous_commit` change) before the call returns. Same rows, same values.

The statement only covers the common case. When the enrollment did not move (intake
changed it since the claim), or the per-campaign stats row or the period's usage
record does not exist yet, its final SELECT raises a marked error, so the whole
statement rolls back and the caller records through the ORM path instead (which
creates the rows, or reloads the enrollment for the event). Nothing is half written.

Billing's and the outbox's writes are their apps' fragments (billing/sql.py,
webhooks/sql.py), kept there beside the services they mirror.

The delivery jobs' webhooks are matched in the statement (enabled, of the account,
filters `*` or the type: `Webhook.wants`), and their drain is rung in it too: the
enqueued mark is set where it is unset or stale, as webhooks.services.drains_enqueue
does after a commit; the caller publishes the drains of the webhooks it rang.
"""

import json
import re
import select
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

import psycopg
from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import DataError, connection, transaction
from psycopg import pq

from billing.sql import USAGE_INCREMENT_CTE
from outreach.models import Enrollment
from webhooks.sql import EVENT_EMIT_CTES

FALLBACK_MARKER = "outreach-record-fallback"

_MARK_NEXT = """
mark AS (
    UPDATE outreach_sendclaim AS c SET sending_at = %(now)s
    FROM outreach_enrollment AS e, outreach_contact AS ct, outreach_campaign AS cp
    WHERE c.enrollment_id = %(next_id)s AND c.batch_id = %(next_batch)s
      AND c.sending_at IS NULL
      AND e.id = c.enrollment_id AND e.status = ANY(%(due)s)
      AND ct.id = e.contact_id AND ct.unsubscribed_at IS NULL AND ct.bounced_at IS NULL
      AND cp.id = e.campaign_id AND cp.status = 'active'
    RETURNING 1
),"""

_SQL = """
WITH
msg AS (
    INSERT INTO outreach_message (id, account_id, enrollment_id, credential_id, step,
        message_id, to_email, subject, sent_at, created_at)
    VALUES (%(message_pk)s, %(account)s, %(enrollment)s, %(credential)s, %(step)s,
        %(message_id)s, %(to_email)s, %(subject)s, %(now)s, %(created)s)
    RETURNING 1
),
moved AS (
    UPDATE outreach_enrollment SET status = %(status)s, current_step = %(step)s,
        sent_at = %(now)s, next_send_at = %(next_send_at)s, completed_at = %(completed_at)s,
        credential_id = %(credential)s, send_attempts = 0, last_error = '',
        updated_at = %(now)s
    WHERE id = %(enrollment)s AND status = ANY(%(due)s)
    RETURNING 1
),
claim AS (
    DELETE FROM outreach_sendclaim WHERE enrollment_id = %(enrollment)s RETURNING 1
),
cred AS (
    UPDATE outreach_smtpcredential SET sent_count = sent_count + 1
    WHERE id = %(credential)s RETURNING 1
),
stats AS (
    UPDATE outreach_credentialcampaignstats SET sends = sends + 1
    WHERE credential_id = %(credential)s AND campaign_id = %(campaign)s RETURNING 1
),{usage}{event}{mark}
verdict AS (
    SELECT (SELECT count(*) FROM moved) AS moved, (SELECT count(*) FROM stats) AS stats,
        (SELECT count(*) FROM usage) AS usage
)
SELECT
    -- Not a constant, so PostgreSQL cannot fold the cast at planning time: it fails
    -- (and the whole statement with it) only when a row the fast path needs is missing.
    CASE WHEN v.moved = 1 AND v.stats = 1 AND v.usage = 1 THEN 1
        ELSE CAST(%(marker)s::text || v.moved || v.stats || v.usage AS integer) END,
    (SELECT count(*) FROM mark),
    ARRAY(SELECT id FROM rung)
FROM verdict AS v
"""
# Billing's and the outbox's writes come from their apps (billing/sql.py, webhooks/sql.py),
# which keep them in step with their services.
SQL = (
    _SQL.replace("{usage}", USAGE_INCREMENT_CTE)
    .replace("{event}", EVENT_EMIT_CTES)
    .replace("{mark}", _MARK_NEXT)  # next_id NULL: marks nothing
)

# The same statement for a server-side prepared statement ($n placeholders), prepared
# once per connection: no parsing or planning per message, no quoting on our side.
PREPARED_NAME = b"outreach_record_sent_v1"
PARAMS = tuple(dict.fromkeys(re.findall(r"%\((\w+)\)s", SQL)))
PREPARED_SQL = re.sub(r"%\((\w+)\)s", lambda m: f"${PARAMS.index(m.group(1)) + 1}", SQL).encode()
_PREPARED_ON = "_outreach_record_prepared_on"  # attribute of the psycopg connection


@dataclass(frozen=True)
class Recorded:
    marked_next: bool
    rung_webhook_ids: list


def supported() -> bool:
    return connection.vendor == "postgresql"


class Pending:
    """A statement on its way: `result()` waits for PostgreSQL's answer (the commit
    included) and returns what `record_sent` returns."""

    def __init__(self, *, pgconn=None, values=None, answer=None):
        self._pgconn, self._values, self._answer = pgconn, values, answer

    def result(self) -> Recorded | None:
        if self._pgconn is not None:
            pgconn, self._pgconn = self._pgconn, None
            with connection.wrap_database_errors:
                results = _fetch(pgconn)
                if _sqlstate(results) == "26000":  # the prepared statement is gone
                    setattr(connection.connection, _PREPARED_ON, None)
                    results = _fetch(_send(connection.connection, self._values))
                self._answer = _answer(results)
        if isinstance(self._answer, BaseException):
            raise self._answer
        return self._answer


def record_sent(**fields) -> Recorded | None:
    """Run the statement and wait for it. None: the common case does not apply (nothing
    was written); record through the ORM."""
    return record_sent_start(**fields).result()


def record_sent_start(*, created: datetime, mark_next=None, **fields) -> Pending:
    """Send the statement: `record_sent_prepare(**fields).start(created=..., mark_next=...)`
    in one go."""
    return record_sent_prepare(**fields).start(created=created, mark_next=mark_next)


def record_sent_prepare(
    *,
    account_id,
    campaign_id,
    credential_id,
    enrollment_id,
    step: int,
    message_id: str,
    to_email: str,
    subject: str,
    now: datetime,
    status: str,
    next_send_at: datetime | None,
    completed_at: datetime | None,
    period: tuple[datetime, datetime],
    event_type: str,
    event_data: dict,
) -> "Prepared":
    """The statement's parameters, but for the wall-clock time and the next claim, ready
    in the text format they are sent in. Pure computation, no database: a worker
    prepares a message's record while the previous one's statement is in flight, so
    that once the server accepts the message only `start` is left to do."""
    params = {
        "message_pk": uuid.uuid4(),
        "account": account_id,
        "campaign": campaign_id,
        "credential": credential_id,
        "enrollment": enrollment_id,
        "step": step,
        "message_id": message_id,
        "to_email": to_email,
        "subject": subject,
        "now": now,
        "status": status,
        "next_send_at": next_send_at,
        "completed_at": completed_at,
        "due": [str(s) for s in Enrollment.DUE_STATUSES],
        "period_start": period[0],
        "period_end": period[1],
        "event_pk": uuid.uuid4(),
        "event_type": event_type,
        "data": json.dumps(event_data, cls=DjangoJSONEncoder),
        "marker": f"{FALLBACK_MARKER}:",
    }
    return Prepared(params)


# The parameters only known when the statement is sent (Prepared.start).
_LATE = ("created", "stale", "next_id", "next_batch")
_LATE_INDEXES = tuple((PARAMS.index(name), name) for name in _LATE)


class Prepared:
    """A record's statement with its parameters ready (record_sent_prepare)."""

    def __init__(self, params: dict):
        self._params = params
        self._values = [None if name in _LATE else _text(params[name]) for name in PARAMS]

    def start(self, *, created: datetime, mark_next=None) -> Pending:
        """Send the statement. Outside a transaction it goes out without waiting: the
        caller may do work that needs no database (build the next message) while
        PostgreSQL runs and commits it, and MUST call `result()` before anything else
        touches the database or the next message is sent. Inside a transaction (tests, a
        caller's atomic block), it runs at once in a savepoint, so the fallback stays
        possible.

        `created`: the wall-clock time of the event, its jobs and the Message row's
        created_at (what their auto_now_add fields would hold). `mark_next`: the claim
        whose start mark rides on this commit, or None."""
        params = {
            **self._params,
            "created": created,
            "stale": created - timedelta(seconds=settings.WEBHOOK_CLAIM_LEASE_SECONDS),
            "next_id": mark_next.pk if mark_next is not None else None,
            "next_batch": mark_next.batch_id if mark_next is not None else None,
        }
        if connection.in_atomic_block:
            try:
                with transaction.atomic(), connection.cursor() as cursor:
                    cursor.execute(SQL, params)
                    return Pending(answer=_row_answer(cursor.fetchone()))
            except DataError as exc:
                if FALLBACK_MARKER in str(exc):
                    return Pending(answer=None)
                raise
        # Autocommit: the one statement is its own transaction, durable when answered.
        connection.ensure_connection()
        values = list(self._values)
        for index, name in _LATE_INDEXES:
            values[index] = _text(params[name])
        with connection.wrap_database_errors:
            pgconn = _send(connection.connection, values)
        return Pending(pgconn=pgconn, values=values)


def _text(value) -> bytes | None:
    """A parameter in PostgreSQL's text format."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.isoformat().encode()  # aware: with its offset
    if isinstance(value, list):
        return ("{" + ",".join(value) + "}").encode()  # plain words only (statuses)
    return str(value).encode()  # Django sets the connection's client_encoding to UTF8


def _send(raw, values):
    pgconn = raw.pgconn
    if getattr(raw, _PREPARED_ON, None) is not pgconn:
        prepared = pgconn.prepare(PREPARED_NAME, PREPARED_SQL)
        if prepared.status != pq.ExecStatus.COMMAND_OK:
            raise psycopg.errors.error_from_result(prepared)
        setattr(raw, _PREPARED_ON, pgconn)
    pgconn.send_query_prepared(PREPARED_NAME, values)  # raises when it cannot
    while pgconn.flush():
        select.select([], [pgconn.socket], [])
    return pgconn


def _fetch(pgconn) -> list:
    """Every result of the query sent (libpq's protocol: until get_result() is None)."""
    results = []
    while True:
        while pgconn.flush():
            select.select([], [pgconn.socket], [])
        pgconn.consume_input()
        if pgconn.is_busy():
            select.select([pgconn.socket], [], [])
            continue
        result = pgconn.get_result()
        if result is None:
            return results
        results.append(result)


def _sqlstate(results: list) -> str | None:
    [result] = results
    if result.status == pq.ExecStatus.FATAL_ERROR:
        return (result.error_field(pq.DiagnosticField.SQLSTATE) or b"").decode()
    return None


def _answer(results: list) -> Recorded | None:
    [result] = results
    if result.status == pq.ExecStatus.TUPLES_OK:
        return _row_answer(
            (
                result.get_value(0, 0),
                int(result.get_value(0, 1)),
                [w for w in result.get_value(0, 2).decode().strip("{}").split(",") if w],
            )
        )
    error = psycopg.errors.error_from_result(result)
    if isinstance(error, psycopg.errors.DataError) and FALLBACK_MARKER in str(error):
        return None
    raise error


def _row_answer(row) -> Recorded:
    _ok, marked, rung = row
    return Recorded(marked_next=bool(marked), rung_webhook_ids=[str(w) for w in rung])
