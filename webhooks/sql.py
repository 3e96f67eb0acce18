"""The outbox's writes as SQL: event_emit's one statement (webhooks.events), and the
same writes as fragments for the one statement that records an accepted message
(outreach/sending/record_sql.py).

EVENT_EMIT_CTES is the whole of webhooks.events.event_emit (tests/outreach/
test_sending_record.py compares the sending engine's two paths row for row): the Event
row; one pending DeliveryJob per enabled webhook of the account whose filters name the
type, or hold `*` and the type is not opt-in (Webhook.wants); and the ring of those
webhooks' drains, `webhooks_drain_ring` (migration 0008), whose ids (`rung`) the caller
publishes a drain message for after its commit (webhooks.events.drains_publish).
Parameters: event_pk, account, event_type, data (JSON text), created, stale.

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

from webhooks.models import EVENT_TYPES

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
