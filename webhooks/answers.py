"""The record of what came back (webhooks.delivery's drains call it; module docstring
there): the attempts that came back together, their attempt rows, each job's next state
and the webhook's failure count, in one statement. The claim is webhooks.jobs."""

import json
import logging
from collections.abc import Sequence
from datetime import datetime, timedelta

from django.db import IntegrityError, connection
from django.utils import timezone

from config.metrics import webhook_outcomes_observe
from webhooks.jobs import FAILURES_BEFORE_DISABLE, MAX_ATTEMPTS, ClaimedJob
from webhooks.models import DeliveryJob, Webhook
from webhooks.posting import AttemptResult, retry_delay

logger = logging.getLogger(__name__)

LOST_ATTEMPT_ERROR = "interrupted: the worker was lost during this attempt; outcome unknown"


def outcome_of(item: ClaimedJob, result: AttemptResult | None, webhook: Webhook | None) -> str:
    if webhook is None:
        return "dropped"  # deleted meanwhile (its jobs went with it)
    if item.attempt is None:
        return "failed"  # a lost fifth attempt: nothing left to try
    if result is None:
        return "dropped"  # the webhook was disabled before the request left
    if result.ok:
        return "succeeded"
    if result.retryable and item.attempt < MAX_ATTEMPTS:
        return "retry"
    return "failed"


# The answers that came back together:
# - `attempt`: their attempt rows (a lost attempt's, then the one just made);
# - `moved`: each job's next state (each by its claim token): finished (succeeded,
#   failed, dropped; a failed job whose claim counted an attempt never made gives it
#   back), or pending again for a retry at its time;
# - `counted`: the webhook's failure count, as the deliveries that ended did it in the
#   order they ended (a delivery that ends without a 2xx is one failure, a 2xx resets
#   the count, and the webhook is disabled once a count reaches FAILURES_BEFORE_DISABLE):
#   `before` the failures before the first 2xx, added to the count as it is now
#   (including a failure recorded meanwhile); with a 2xx (`reset`), `after` the failures
#   after the last one and `peak` the most in a row after one. A webhook with nothing to
#   change is not written.
RECORD_SQL = f"""
WITH attempt AS (
    INSERT INTO webhooks_webhookdelivery (id, webhook_id, job_id, event_type, attempt,
        status_code, error, response_excerpt, duration_ms, delivered_at, test, created_at)
    SELECT gen_random_uuid(), %(webhook)s, r.job, r.type, r.attempt, r.code, r.error,
        r.excerpt, r.duration, r.delivered, false, r.started
    FROM json_to_recordset(%(rows)s::json) AS r(job uuid, type text, attempt integer,
        code integer, error text, excerpt text, duration integer, delivered timestamptz,
        started timestamptz)
    RETURNING 1
),
moved AS (
    UPDATE webhooks_deliveryjob AS j
    SET state = t.state, claim_token = NULL, attempts = j.attempts - t.unmade,
        next_attempt_at = COALESCE(t.next, j.next_attempt_at),
        finished_at = CASE WHEN t.state = 'pending' THEN j.finished_at ELSE %(now)s END
    FROM json_to_recordset(%(moves)s::json)
        AS t(id uuid, token uuid, state text, next timestamptz, unmade integer)
    WHERE j.id = t.id AND j.claim_token = t.token
    RETURNING 1
),
counted AS (
    UPDATE webhooks_webhook
    SET consecutive_failures = CASE WHEN %(reset)s::boolean THEN %(after)s::integer
            ELSE consecutive_failures + %(before)s::integer END,
        disabled_at = CASE WHEN disabled_at IS NULL AND (%(peak)s::integer >= {FAILURES_BEFORE_DISABLE}
            OR (%(before)s::integer > 0
                AND consecutive_failures + %(before)s::integer >= {FAILURES_BEFORE_DISABLE}))
            THEN %(now)s ELSE disabled_at END
    WHERE id = %(webhook)s AND (%(before)s::integer + %(after)s::integer > 0
        OR %(reset)s::boolean AND consecutive_failures > 0)
    RETURNING disabled_at = %(now)s AS disabled
)
SELECT (SELECT count(*) FROM attempt), (SELECT count(*) FROM moved),
    COALESCE((SELECT bool_or(disabled) FROM counted), false)
"""  # noqa: S608 - a constant of the code; every value is a parameter


def answers_record(
    *,
    webhook_id,
    webhook: Webhook | None,
    answers: Sequence[tuple[ClaimedJob, AttemptResult | None]],
) -> bool:
    """Record the attempts that came back together (the module docstring; RECORD_SQL),
    `answers` as (the claimed job, its answer or None when no request was made), each
    with its outcome (outcome_of, `webhook` as the drain's last claim read it). Returns
    whether a delivery failed an attempt (a retry, or failed). Nothing is written when
    the webhook is gone."""
    if not answers:
        return False
    now = timezone.now()
    outcomes = [(item, result, outcome_of(item, result, webhook)) for item, result in answers]
    params, failed = _record_params(outcomes, now=now)
    try:
        with connection.cursor() as cursor:
            cursor.execute(RECORD_SQL, {"webhook": webhook_id, "now": now, **params})
            _rows, _moved, disabled = cursor.fetchone()
    except IntegrityError:
        return failed  # the webhook was deleted meanwhile: nothing left to record
    if disabled:
        logger.info(
            "webhook %s disabled after %s failed deliveries", webhook_id, FAILURES_BEFORE_DISABLE
        )
    webhook_outcomes_observe(outcomes)
    return failed


def _record_params(outcomes, *, now) -> tuple[dict, bool]:
    """RECORD_SQL's parameters for the outcomes (JSON: one text parameter costs less to
    send than a column each), and whether a delivery failed an attempt:

    - `rows`: the attempt rows, a lost attempt's (its claim lapsed), then the answer's;
    - `moves`: each job's next state: its state, its next attempt's time (a retry), and
      the attempt its claim counted but never made (1 for a failed job without an
      attempt: a lost fifth attempt);
    - the webhook's failure count (`_failure_count`), from the deliveries that ended."""
    rows, moves, ended = [], [], []
    failed = False
    for item, result, outcome in outcomes:
        job = {"job": str(item.job.id), "type": item.job.event.type}
        if item.lost_attempt is not None:
            started = min(item.lost_at or now, now)
            rows.append(
                {
                    **job,
                    "attempt": item.lost_attempt,
                    "error": LOST_ATTEMPT_ERROR,
                    "excerpt": "",
                    "started": started.isoformat(),
                }
            )
        if result is not None:
            assert item.attempt is not None  # a request was made: for this attempt
            rows.append(
                {
                    **job,
                    "attempt": item.attempt,
                    "code": result.status_code,
                    "error": result.error,
                    "excerpt": result.excerpt,
                    "duration": result.duration_ms,
                    # When a 2xx came back (the webhook gone, nothing is recorded).
                    "delivered": result.ended_at.isoformat() if outcome == "succeeded" else None,
                    "started": result.started_at.isoformat(),
                }
            )
        # succeeded, failed, dropped: the states' own names
        move = {"id": str(item.job.id), "token": str(item.job.claim_token), "state": outcome}
        move["unmade"] = 1 if outcome == "failed" and item.attempt is None else 0
        if outcome == "retry":
            assert item.attempt is not None
            move["state"] = DeliveryJob.State.PENDING.value
            move["next"] = (now + timedelta(seconds=retry_delay(item.attempt))).isoformat()
        moves.append(move)
        if outcome in ("succeeded", "failed"):
            ended.append((result.ended_at if result else now, outcome == "succeeded"))
        failed = failed or outcome in ("retry", "failed")
    return {"rows": json.dumps(rows), "moves": json.dumps(moves), **_failure_count(ended)}, failed


def _failure_count(ended: list[tuple[datetime, bool]]) -> dict:
    """RECORD_SQL's `counted`: the deliveries that ended, (when, whether with a 2xx) each,
    in the order they ended, as runs of failures between 2xx answers."""
    runs = [0]  # failures in a row: before the first 2xx, then after each
    for _, succeeded in sorted(ended):
        if succeeded:
            runs.append(0)
        else:
            runs[-1] += 1
    return {
        "reset": len(runs) > 1,
        "before": runs[0],
        "after": runs[-1] if len(runs) > 1 else 0,
        "peak": max(runs[1:], default=0),
    }
