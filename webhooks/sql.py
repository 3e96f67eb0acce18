"""The outbox's writes as SQL. An event is written by one fragment with its parameters,
both defined here: EVENT_EMIT_CTES and `event_params`. webhooks.events.event_emit runs
them as its one statement (EVENT_EMIT_SQL); a producer that writes its state change in
one statement of its own splices the same fragment into it and passes the same
parameters (outreach/sending/record_sql.py, outreach/enrollments/opens.py). No module
outside webhooks names the outbox's tables (tests/foundation/test_outbox_tables.py).

EVENT_EMIT_CTES: the Event row; one pending DeliveryJob per enabled webhook of the
account whose filters name the type, or hold `*` and the type is not opt-in
(Webhook.wants); and the ring of those webhooks' drains, `webhooks_drain_ring`
(migration 0008), whose ids (`rung`) the caller publishes a drain message for after its
commit (webhooks.events.drains_publish_on_commit). Parameters (`event_params`):
event_pk, account, event_type, data (JSON text), created, stale.

The ring, inside the producer's transaction (docs/webhooks.md, "At least once"):

1. the producer takes the drain's lock of each webhook (an advisory lock, shared, of
   class DRAIN_LOCK_CLASS), held until its transaction ends;
2. with a snapshot taken after that (the function's next statement), it marks the
   webhooks no drain holds and none is on its way to (`drain_enqueued_at`, as
   drains_enqueue does), skipping a row another transaction holds rather than waiting;
3. a drain message goes out after the commit for each webhook marked or skipped.

A webhook whose drain is running needs nothing: the drain cannot leave while a producer
holds the lock (DRAIN_LEAVE_SQL takes it alone or not at all), so it sees the jobs once
they commit. Producers never wait for each other: the lock is shared among them, and
the mark skips a row held by another.
"""

import json
import uuid
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.utils import timezone

from webhooks.models import EVENT_TYPES, OPT_IN_EVENT_TYPES

if TYPE_CHECKING:
    from accounts.models import Account

# Class (first key) of the drains' advisory locks; the second is hashtext(webhook id).
# "WHDR" in ASCII. Also a literal in webhooks_drain_ring (migration 0008), which cannot
# import it: tests/webhooks/test_drain_lock_class.py fails when the two differ.
DRAIN_LOCK_CLASS = 0x57484452

_STARRED = ", ".join(f"'{event_type}'" for event_type in EVENT_TYPES)

EVENT_EMIT_CTES = f"""
event AS (
    INSERT INTO webhooks_event (id, account_id, type, data, created_at)
    VALUES (%(event_pk)s, %(account)s, %(event_type)s, %(data)s::json, %(created)s)
    RETURNING 1
),
jobs AS (
    INSERT INTO webhooks_deliveryjob (id, event_id, webhook_id, state, attempts,
        next_attempt_at, created_at)
    SELECT gen_random_uuid(), %(event_pk)s, w.id, 'pending', 0, %(created)s, %(created)s
    FROM webhooks_webhook AS w
    WHERE w.account_id = %(account)s AND w.disabled_at IS NULL
      AND (w.event_filters ? %(event_type)s
           OR (w.event_filters ? '*' AND %(event_type)s IN ({_STARRED})))
    RETURNING webhook_id
),
rung AS (
    SELECT id FROM webhooks_drain_ring(
        ARRAY(SELECT webhook_id FROM jobs), %(created)s, %(stale)s) AS id
),"""  # noqa: S608 - constants of the code (the event types); every value is a parameter

# event_emit's one statement: the event, its jobs, the ring.
EVENT_EMIT_SQL = "WITH" + EVENT_EMIT_CTES.rstrip(",") + "\nSELECT ARRAY(SELECT id FROM rung)"  # noqa: S608


def event_params(
    account: "Account | uuid.UUID",
    event_type: str,
    data: dict[str, Any],
    *,
    created: datetime | None = None,
) -> dict[str, Any]:
    """EVENT_EMIT_CTES's parameters for one event: `account` an Account or its id, `data`
    a JSON-serialisable dict (datetimes, UUIDs and Decimals allowed), `created` its time
    (now). Raises ValueError for a type outside EVENT_TYPES and OPT_IN_EVENT_TYPES."""
    if event_type not in EVENT_TYPES and event_type not in OPT_IN_EVENT_TYPES:
        raise ValueError(f"unknown event type {event_type!r}")
    if created is None:
        created = timezone.now()
    return {
        "event_pk": uuid.uuid4(),
        "account": getattr(account, "pk", account),
        "event_type": event_type,
        "data": json.dumps(data, cls=DjangoJSONEncoder),
        "created": created,
        "stale": ring_stale(created),
    }


def ring_stale(now: datetime) -> datetime:
    """A ring's mark (`drain_enqueued_at`) this old or older is taken for a lost drain
    message: the webhook is rung again (the ring, webhooks.events.drains_enqueue)."""
    return now - timedelta(seconds=settings.WEBHOOK_CLAIM_LEASE_SECONDS)


# The drain leaves: its lease given back, if no producer holds the drain's lock (a
# transaction that rang while the lease was held and has not committed). The lock is
# the statement's own, taken only to see that nobody else holds it.
DRAIN_LEAVE_SQL = f"""
UPDATE webhooks_webhook SET drain_token = NULL, drain_until = NULL
WHERE id = %s AND drain_token = %s
  AND pg_try_advisory_xact_lock({DRAIN_LOCK_CLASS}, hashtext(id::text))
RETURNING 1
"""  # noqa: S608 - a constant of the code; every value is a parameter

# The drain takes its lease (or keeps its own): free, lapsed or already its token. The
# ring's mark is cleared (the drain it asked for is running); the account comes back so
# the drain can count itself against the account's share (webhooks.delivery).
LEASE_TAKE_SQL = """
UPDATE webhooks_webhook SET drain_token = %s, drain_until = %s, drain_enqueued_at = NULL
WHERE id = %s AND (drain_until IS NULL OR drain_until <= %s OR drain_token = %s)
RETURNING account_id
"""
