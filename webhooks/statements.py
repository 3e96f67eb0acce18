"""The drain's common case, one statement each (webhooks.delivery calls these): the claim
of a healthy webhook's due jobs (`jobs_claim_fresh`), and the record of answers that all
succeeded (`answers_record`). Anything else goes through webhooks.jobs, whose rules these
follow: a test compares them (tests/webhooks/test_claim_race.py, test_delivery.py)."""

import uuid
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, connection
from django.utils import timezone

from config.metrics import webhook_outcomes_observe
from webhooks.jobs import MAX_ATTEMPTS, ClaimedJob, jobs_claim, jobs_record
from webhooks.models import DeliveryJob, Event, Webhook
from webhooks.posting import AttemptResult

_SECRET = Webhook._meta.get_field("secret")  # decrypts the stored value (config.crypto)


# ---------------------------------------------------------------- the claim


# A healthy webhook's claim (the drain's common case) as one statement: the webhook as
# it is now and its due jobs, oldest first, claimed as jobs_claim claims them (the state
# and the due time re-checked under each row's lock; a lapsed claim told apart by its
# token), with their events. A webhook disabled or failing claims nothing here (its
# drain goes through claimable's rules).
CLAIM_HEALTHY_SQL = """
WITH hook AS (
    SELECT id, url, secret, consecutive_failures, disabled_at
    FROM webhooks_webhook WHERE id = %(webhook)s
),
picked AS (
    SELECT j.id, j.next_attempt_at FROM webhooks_deliveryjob AS j
    WHERE j.webhook_id = %(webhook)s AND j.state IN ('pending', 'delivering')
      AND j.next_attempt_at <= %(now)s AND j.id <> ALL(%(in_flight)s::uuid[])
      AND EXISTS (SELECT FROM hook WHERE disabled_at IS NULL AND consecutive_failures = 0)
    ORDER BY j.next_attempt_at
    LIMIT %(limit)s
),
claimed AS (
    UPDATE webhooks_deliveryjob AS j
    SET state = 'delivering', attempts = j.attempts + 1, next_attempt_at = %(lease_end)s,
        claim_token = CASE WHEN j.state = 'pending' THEN %(fresh)s::uuid ELSE %(lost)s::uuid END
    FROM picked
    WHERE j.id = picked.id AND j.state IN ('pending', 'delivering')
      AND j.next_attempt_at <= %(now)s
    RETURNING j.id, j.event_id, j.attempts, j.claim_token, j.created_at,
        picked.next_attempt_at AS was_due
)
SELECT h.id, h.url, h.secret, h.consecutive_failures, h.disabled_at,
    c.id, c.event_id, c.attempts, c.claim_token, c.created_at, c.was_due,
    e.account_id, e.type, e.data, e.created_at
FROM hook AS h
LEFT JOIN (claimed AS c JOIN webhooks_event AS e ON e.id = c.event_id) ON true
ORDER BY c.created_at
"""


def jobs_claim_fresh(
    *, webhook_id, limit: int, attempt_failed: bool | None = None, in_flight=()
) -> tuple[Webhook | None, list[ClaimedJob]]:
    """The drain's claim: the webhook as it is now (None once deleted: a rotated secret,
    a new URL or a disable applies to the very next request) and up to `limit` of its
    jobs claimed, as jobs_claim claims them. While no failure is known (`attempt_failed`
    False, as the drain knows it) that is one statement; otherwise, or when the webhook
    turns out to be failing or disabled, jobs_claim's."""
    if attempt_failed is False and limit > 0:
        webhook, claimed = _claim_healthy(webhook_id=webhook_id, limit=limit, in_flight=in_flight)
        if webhook is None or (webhook.is_enabled and webhook.consecutive_failures == 0):
            return webhook, claimed
    else:
        webhook = Webhook.objects.filter(id=webhook_id).first()
        if webhook is None:
            return None, []
    return webhook, jobs_claim(
        webhook_id=webhook_id,
        limit=limit,
        webhook=webhook,
        attempt_failed=attempt_failed,
        in_flight=in_flight,
    )


def _claim_healthy(*, webhook_id, limit: int, in_flight) -> tuple[Webhook | None, list[ClaimedJob]]:
    now = timezone.now()
    lease_end = now + _lease()
    fresh_token, lost_token = uuid.uuid4(), uuid.uuid4()
    with connection.cursor() as cursor:
        cursor.execute(
            CLAIM_HEALTHY_SQL,
            {
                "webhook": webhook_id,
                "now": now,
                "in_flight": list(in_flight),
                "limit": limit,
                "lease_end": lease_end,
                "fresh": fresh_token,
                "lost": lost_token,
            },
        )
        rows = cursor.fetchall()
    if not rows:
        return None, []
    pk, url, secret, failures, disabled_at = rows[0][:5]
    webhook = Webhook(
        id=pk,
        url=url,
        secret=_SECRET.from_db_value(secret, None, connection) or "",
        consecutive_failures=failures,
        disabled_at=disabled_at,
    )
    webhook._state.adding = False
    claimed = [
        _claimed(row, webhook_id=pk, lease_end=lease_end, lost_token=lost_token)
        for row in rows
        if row[5] is not None  # else the webhook's row alone: nothing claimed
    ]
    return webhook, claimed


def _claimed(row, *, webhook_id, lease_end, lost_token) -> ClaimedJob:
    """A claimed job of CLAIM_HEALTHY_SQL's row, with its event, as jobs_claim gives it."""
    job_id, event_id, attempts, token, created_at, was_due = row[5:11]
    account_id, event_type, data, event_created_at = row[11:]
    job = DeliveryJob(
        id=job_id,
        event_id=event_id,
        webhook_id=webhook_id,
        state=DeliveryJob.State.DELIVERING,
        attempts=attempts,
        next_attempt_at=lease_end,
        claim_token=token,
        created_at=created_at,
    )
    job._state.adding = False
    job.event = Event(
        id=event_id, account_id=account_id, type=event_type, data=data, created_at=event_created_at
    )
    job.event._state.adding = False
    lost = attempts - 1 if token == lost_token else None
    # A lapsed claim's due time was its lease's end: that claim was made a lease earlier.
    return ClaimedJob(
        job=job,
        lost_attempt=lost,
        lost_at=was_due - _lease() if lost is not None else None,
        attempt=None if lost is not None and lost >= MAX_ATTEMPTS else attempts,
    )


def _lease() -> timedelta:
    return timedelta(seconds=settings.WEBHOOK_CLAIM_LEASE_SECONDS)


# ---------------------------------------------------------------- the record


def answers_record(*, webhook_id, outcomes: list[tuple[ClaimedJob, AttemptResult | None, str]]):
    """Record the answers that came back together (jobs_record): in one statement when
    all succeeded at the attempt their claim counted, else through jobs_record."""
    if not all(
        outcome == "succeeded" and result is not None and item.lost_attempt is None
        for item, result, outcome in outcomes
    ):
        jobs_record(webhook_id=webhook_id, outcomes=outcomes)
        return
    try:
        _record_succeeded(webhook_id=webhook_id, outcomes=outcomes, now=timezone.now())
        webhook_outcomes_observe(outcomes)
    except IntegrityError:
        pass  # the webhook was deleted meanwhile: nothing left to record


# Deliveries that all succeeded, recorded in one statement (jobs_record's common case):
# their attempt rows, their jobs succeeded (each by its claim token) and the webhook's
# failure count reset if it had one.
RECORD_SUCCEEDED_SQL = """
WITH attempt AS (
    INSERT INTO webhooks_webhookdelivery (id, webhook_id, job_id, event_type, attempt,
        status_code, error, response_excerpt, duration_ms, delivered_at, test, created_at)
    SELECT gen_random_uuid(), %(webhook)s, r.job_id, r.event_type, r.attempt, r.status_code,
        NULL, r.excerpt, r.duration_ms, r.delivered_at, false, r.started_at
    FROM unnest(%(jobs)s::uuid[], %(types)s::text[], %(attempts)s::int[], %(codes)s::int[],
        %(excerpts)s::text[], %(durations)s::int[], %(delivered)s::timestamptz[],
        %(started)s::timestamptz[])
        AS r(job_id, event_type, attempt, status_code, excerpt, duration_ms, delivered_at,
            started_at)
    RETURNING 1
),
done AS (
    UPDATE webhooks_deliveryjob AS j
    SET state = 'succeeded', claim_token = NULL, finished_at = %(now)s
    FROM unnest(%(jobs)s::uuid[], %(tokens)s::uuid[]) AS t(id, token)
    WHERE j.id = t.id AND j.claim_token = t.token
    RETURNING 1
),
reset AS (
    UPDATE webhooks_webhook SET consecutive_failures = 0
    WHERE id = %(webhook)s AND consecutive_failures > 0
    RETURNING 1
)
SELECT (SELECT count(*) FROM attempt), (SELECT count(*) FROM done), (SELECT count(*) FROM reset)
"""


def _record_succeeded(*, webhook_id, outcomes, now) -> None:
    fields = [(item, result.row_fields()) for item, result, _ in outcomes]
    with connection.cursor() as cursor:
        cursor.execute(
            RECORD_SUCCEEDED_SQL,
            {
                "webhook": webhook_id,
                "now": now,
                "jobs": [item.job.id for item, _ in fields],
                "tokens": [item.job.claim_token for item, _ in fields],
                "types": [item.job.event.type for item, _ in fields],
                "attempts": [item.attempt for item, _ in fields],
                "codes": [row["status_code"] for _, row in fields],
                "excerpts": [row["response_excerpt"] for _, row in fields],
                "durations": [row["duration_ms"] for _, row in fields],
                "delivered": [row["delivered_at"] for _, row in fields],
                "started": [row["created_at"] for _, row in fields],
            },
        )
