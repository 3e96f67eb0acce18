"""The drain's ring as a function (webhooks.sql, docs/webhooks.md "At least once"): a
producer rings inside its own transaction, holding the drain's lock until it commits."""

from django.db import migrations

# Keep in step with webhooks.sql.DRAIN_LOCK_CLASS (1464353874, "WHDR"):
# tests/webhooks/test_drain_lock_class.py fails when the two differ.
RING_FORWARD = """
CREATE OR REPLACE FUNCTION webhooks_drain_ring(
    webhook_ids uuid[], rung_at timestamptz, stale timestamptz
) RETURNS SETOF uuid LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    -- 1. The drain's lock, shared, until the producer's transaction ends: a drain
    --    leaves only when it takes it alone, so none leaves between this ring and the
    --    producer's commit without the producer's jobs.
    PERFORM pg_advisory_xact_lock_shared(1464353874, hashtext(w::text))
    FROM unnest(webhook_ids) AS w;
    -- 2. A statement of a VOLATILE function reads with a fresh snapshot: a drain that
    --    left while step 1 waited is seen gone.
    RETURN QUERY
    WITH wanted AS (
        SELECT id FROM webhooks_webhook
        WHERE id = ANY(webhook_ids)
          AND (drain_enqueued_at IS NULL OR drain_enqueued_at <= stale)
          AND (drain_until IS NULL OR drain_until <= rung_at)
    ),
    free AS (
        SELECT id FROM webhooks_webhook WHERE id IN (SELECT id FROM wanted)
        FOR NO KEY UPDATE SKIP LOCKED
    ),
    marked AS (
        UPDATE webhooks_webhook SET drain_enqueued_at = rung_at
        WHERE id IN (SELECT id FROM free)
          AND (drain_enqueued_at IS NULL OR drain_enqueued_at <= stale)
          AND (drain_until IS NULL OR drain_until <= rung_at)
        RETURNING id
    )
    -- 3. A drain message for each webhook marked, and for each whose row another
    --    transaction holds (not waited for: it may be a producer's, held until commit).
    SELECT id FROM marked
    UNION ALL
    SELECT id FROM wanted WHERE id NOT IN (SELECT id FROM free);
END
$$;
"""

RING_REVERSE = "DROP FUNCTION IF EXISTS webhooks_drain_ring(uuid[], timestamptz, timestamptz);"


class Migration(migrations.Migration):
    dependencies = [
        ("webhooks", "0007_indexes_written_per_event"),
    ]

    operations = [migrations.RunSQL(RING_FORWARD, RING_REVERSE)]
