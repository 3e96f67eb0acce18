"""The outbox's writes as SQL fragments, for the one statement that records an accepted
message (outreach/sending/record_sql.py).

EVENT_EMIT_CTES is webhooks.events.event_emit followed by drains_enqueue's ring, and
must change with them (tests/outreach/test_sending_record.py compares both paths row for
row): the Event row; one pending DeliveryJob per enabled webhook of the account whose
filters hold `*` or the type (Webhook.wants); the drain mark set on those webhooks where
it is unset or stale and no drain holds its lease (the caller publishes the drains of
the webhooks returned by `rung`). Parameters: event_pk, account, event_type, data (JSON
text), created, stale.
"""

EVENT_EMIT_CTES = """
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
      AND (w.event_filters ? '*' OR w.event_filters ? %(event_type)s)
    RETURNING webhook_id
),
rung AS (
    UPDATE webhooks_webhook SET drain_enqueued_at = %(created)s
    WHERE id IN (SELECT webhook_id FROM jobs)
      AND (drain_enqueued_at IS NULL OR drain_enqueued_at <= %(stale)s)
      AND (drain_until IS NULL OR drain_until <= %(created)s)
    RETURNING id
),"""
