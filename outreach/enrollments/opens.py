"""An enrollment's first open (intake's open pixel calls `enrollment_open`): a read, then
one statement that records the open, fires `enrollment.opened` and counts it.

The read (the enrollment, its contact's email, its campaign's account) answers a repeat
open by itself: one statement, in autocommit, nothing written but the first open of the
message the pixel names (Message.opened_at, API.md 17, counted in the hour's analytics,
outreach.analytics), which the same statement records
and reports with the branch the enrollment waits at (the caller decides it). For a first open the event's
data is built from it by the one function every producer uses
(outreach.events.enrollment_event_data), and one prepared statement, its own transaction,
writes the rest:

- the enrollment's opened_at and what the open answered (`opened_on`: its last step sent
  and that step's variant, outreach.enrollments.stats.answered), only if nobody opened it
  meanwhile and the columns the event and the answer were built from are still what the
  read saw (the UPDATE re-checks them on the row it locks);
- the event, its delivery jobs and the ring of their drains (webhooks.sql's fragment and
  parameters, event_emit's own);
- the campaign's `opened` count, then its variant's (the stats' lock order: last, after
  the ring).

When the UPDATE matched nothing (opened, or changed, since the read) the statement fails
on purpose and rolls back whole; the open is then read again under the enrollment's row
lock and written in that transaction, where it cannot fail that way. Through the ORM this
was seven round trips (BEGIN, the open, the event, the foreign keys checked, two counts,
COMMIT); bench/README.md ("the last step to 0.8") measures the difference.
"""

import contextlib
import json
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime

from django.db import DataError, connection, transaction
from django.utils import timezone

from config.db.counters import counter_shard
from outreach.analytics import message_cte
from outreach.enrollments.stats import answered, answered_position, stats_ctes, variant_ctes
from outreach.events import enrollment_event_data
from outreach.models.campaigns import Campaign
from outreach.models.contacts import Contact
from outreach.models.sending import Enrollment
from webhooks.events import drains_publish_on_commit
from webhooks.models import ENROLLMENT_OPENED
from webhooks.sql import EVENT_EMIT_CTES, event_params

# What the read returns, in order: the enrollment's fields (attribute names), then its
# contact's email and its campaign's account.
_FIELDS = (
    "id",
    "campaign_id",
    "contact_id",
    "status",
    "current_step",
    "last_step",
    "variants",
    "sent_at",
    "replied_at",
    "bounce_reason",
    "opened_at",
    "opened_on",
)
_READ = f"""
WITH m AS (
    -- The first open of the message the pixel names (its step; a pixel naming none: the
    -- enrollment's last message), in the same statement: a repeat stays one statement.
    UPDATE outreach_message SET opened_at = %(at)s
    WHERE id = (
        SELECT id FROM outreach_message
        WHERE enrollment_id = %(enrollment)s
          AND (%(step)s::integer IS NULL OR step = %(step)s::integer)
        ORDER BY sent_at DESC LIMIT 1
    ) AND opened_at IS NULL
    RETURNING id, account_id, enrollment_id, credential_id, step_key
),{{analytics}}
SELECT {", ".join(f"e.{name}" for name in _FIELDS)}, c.email, k.account_id,
    (SELECT step_key FROM m),
    CASE WHEN e.status = 'sent' AND e.branch_deadline IS NOT NULL THEN e.current_key END
FROM outreach_enrollment AS e
JOIN outreach_contact AS c ON c.id = e.contact_id
JOIN outreach_campaign AS k ON k.id = e.campaign_id
WHERE e.id = %(enrollment)s""".replace(  # noqa: S608 - the code's own column names
    "{analytics}", message_cte("opened", source="m", at="%(at)s::timestamptz")
)
READ_SQL = _READ
READ_LOCKED_SQL = _READ + "\nFOR NO KEY UPDATE OF e"

_VARIANTS = Enrollment._meta.get_field("variants")

MARKER = "outreach-open-changed"

_OPEN = """
WITH
opened AS (
    UPDATE outreach_enrollment AS e
    SET opened_at = %(at)s, updated_at = %(at)s,
        opened_on = CASE WHEN e.current_step > 0 THEN %(answered)s ELSE e.opened_on END
    WHERE e.id = %(enrollment)s AND e.opened_at IS NULL
      AND e.status = %(status)s AND e.current_step = %(steps_sent)s
      AND e.last_step = %(last_step)s
      AND COALESCE(
        e.variants ->> (CASE WHEN e.last_step > 0 THEN e.last_step ELSE e.current_step END)::text,
        'A') = %(letter)s
      AND e.sent_at IS NOT DISTINCT FROM %(sent_at)s
      AND e.replied_at IS NOT DISTINCT FROM %(replied_at)s
      AND e.bounce_reason IS NOT DISTINCT FROM %(bounce_reason)s
    RETURNING 1
),{event}{campaign_stats}{variant_stats}
verdict AS MATERIALIZED (SELECT count(*) AS opened FROM opened)
SELECT
    -- Not a constant, so PostgreSQL cannot fold the cast at planning time: it fails (and
    -- the whole statement with it) only when the UPDATE matched nothing.
    CASE WHEN v.opened = 1 THEN 1 ELSE CAST(%(marker)s::text || v.opened AS integer) END,
    ARRAY(SELECT id FROM rung)
FROM verdict AS v
"""
OPEN_SQL = (
    _OPEN.replace("{event}", EVENT_EMIT_CTES)
    .replace(
        "{campaign_stats}",
        stats_ctes(
            "opened", when="EXISTS (SELECT FROM opened) AND (SELECT count(*) FROM rung) >= 0"
        ),
    )
    .replace(
        "{variant_stats}",
        variant_ctes(
            "opened",
            when="%(counted)s AND EXISTS (SELECT FROM opened) AND (SELECT count(*) FROM cstats) >= 0",
        ),
    )
)


@dataclass
class MessageOpen:
    """The open as its message sees it (API.md 17): `step`, the position the pixel names
    (None: a pixel made before pixels named one, which counts for the last message);
    after the read, `step_key`, the key of the message's step when this was its first
    open (None otherwise), and `waiting_key`, the branch the enrollment waits at then."""

    at: datetime
    step: int | None = None
    step_key: str | None = None
    waiting_key: str | None = None


# The open the read of this call records on its message (set by enrollment_open).
_message: ContextVar[MessageOpen | None] = ContextVar("message_open", default=None)


def enrollment_open(*, enrollment_id, at, step: int | None = None) -> bool:
    """Record an enrollment's first open, fire enrollment.opened and count it (module
    docstring); whether this call was the first open. A repeat open, or an enrollment
    that is gone, is one read and writes nothing. Outside a transaction the write is its
    own; inside one (a caller's atomic block) it runs in a savepoint."""
    return enrollment_message_open(enrollment_id=enrollment_id, at=at, step=step)[0]


def enrollment_message_open(
    *, enrollment_id, at, step: int | None = None
) -> tuple[bool, MessageOpen]:
    """`enrollment_open`, and the first open of the message (MessageOpen), recorded by
    the read's statement (a repeat open stays one statement): (first open of the
    enrollment, the message's open)."""
    message = MessageOpen(at=at, step=step)
    token = _message.set(message)
    try:
        return _open(enrollment_id, at), message
    finally:
        _message.reset(token)


def _open(enrollment_id, at) -> bool:
    enrollment = _read(enrollment_id, READ_SQL)
    if enrollment is None:
        return False
    scope = transaction.atomic() if connection.in_atomic_block else contextlib.nullcontext()
    try:
        with scope:
            rung = _write(enrollment, at)
    except DataError as exc:
        if MARKER not in str(exc):
            raise
        # Opened or changed since the read: again, holding the row.
        with transaction.atomic():
            enrollment = _read(enrollment_id, READ_LOCKED_SQL)
            if enrollment is None:
                return False
            rung = _write(enrollment, at)
    drains_publish_on_commit(rung)
    return True


def _read(enrollment_id, sql: str) -> Enrollment | None:
    """The enrollment as the open needs it (its contact's email and its campaign's
    account loaded), or None when it is gone or was opened before."""
    message = _message.get() or MessageOpen(at=timezone.now())
    with connection.cursor() as cursor:
        cursor.execute(
            sql,
            {
                "enrollment": enrollment_id,
                "at": message.at,
                "step": message.step,
                "shard": counter_shard(),  # the analytics rows' (config/db/counters.py)
            },
        )
        row = cursor.fetchone()
    if row is None:
        return None
    values = dict(zip(_FIELDS, row, strict=False))
    step_key, waiting_key = row[len(_FIELDS) + 2 :]
    if step_key is not None:  # the message's first open (a read again finds it opened)
        message.step_key, message.waiting_key = step_key, waiting_key
    if values["opened_at"] is not None:
        return None
    # The column's text, as the ORM's JSONField decodes it.
    values["variants"] = json.loads(values["variants"] or "{}", cls=_VARIANTS.decoder)
    email, account_id = row[len(_FIELDS) : len(_FIELDS) + 2]
    enrollment = _loaded(Enrollment, values)
    enrollment.contact = _loaded(Contact, {"id": values["contact_id"], "email": email})
    enrollment.campaign = _loaded(Campaign, {"id": values["campaign_id"], "account_id": account_id})
    return enrollment


def _write(enrollment: Enrollment, at) -> list[str]:
    """OPEN_SQL for the enrollment as read; the ids of the webhooks whose drains it rang.
    Raises DataError (MARKER) when the enrollment was opened or changed since the read."""
    code = answered(enrollment)  # "" before any step was sent: no variant counted
    letter = (enrollment.variants or {}).get(str(answered_position(enrollment)), "A")
    # The data as every producer of the event builds it, from the state the UPDATE re-checks.
    data = enrollment_event_data(enrollment, event_type=ENROLLMENT_OPENED)
    with connection.cursor() as cursor:
        cursor.execute(
            OPEN_SQL,
            {
                "enrollment": enrollment.pk,
                "at": at,
                "answered": code,
                "status": enrollment.status,
                # The steps sent and the last one's position, re-checked; the
                # position is also the step whose variant the open counts for.
                "steps_sent": enrollment.current_step,
                "last_step": enrollment.last_step,
                "step": answered_position(enrollment),
                "letter": letter,
                "sent_at": enrollment.sent_at,
                "replied_at": enrollment.replied_at,
                "bounce_reason": enrollment.bounce_reason,
                "campaign": enrollment.campaign_id,
                "counted": bool(code),
                "variant": letter,
                **event_params(enrollment.campaign.account_id, ENROLLMENT_OPENED, data),
                "marker": f"{MARKER}:",
                # The counter rows' shard this statement adds to (config/db/counters.py).
                "shard": counter_shard(),
            },
        )
        _ok, rung = cursor.fetchone()
    return [str(webhook_id) for webhook_id in rung]


def _loaded(model, values: dict):
    """An instance of `model` as a query of these fields (attribute names) loads it: the
    others are read from the database when first used."""
    names = [f.attname for f in model._meta.concrete_fields if f.attname in values]
    return model.from_db(connection.alias, names, [values[name] for name in names])
