"""Delivery jobs: the claim of due jobs for an attempt, and the record of what came
back (webhooks.delivery's drains call both; module docstring there)."""

import logging
import operator
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import reduce

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from config.metrics import webhook_outcomes_observe
from webhooks.models import DeliveryJob, Webhook, WebhookDelivery
from webhooks.posting import AttemptResult, retry_delay

logger = logging.getLogger(__name__)

MAX_ATTEMPTS = 5  # per delivery
FAILURES_BEFORE_DISABLE = 5  # consecutive failed deliveries
LOST_ATTEMPT_ERROR = "interrupted: the worker was lost during this attempt; outcome unknown"


# ---------------------------------------------------------------- claims


@dataclass
class ClaimedJob:
    job: DeliveryJob
    lost_attempt: int | None  # the attempt a lost worker left unfinished
    lost_at: datetime | None  # when that attempt's claim was made
    attempt: int | None  # the attempt to make now; None when the job is exhausted


def attempt_failing(webhook_id) -> bool:
    """Whether a delivery of the webhook failed an attempt and is not finished."""
    return DeliveryJob.objects.filter(
        Q(state=DeliveryJob.State.PENDING, attempts__gt=0)
        | Q(state=DeliveryJob.State.DELIVERING, attempts__gt=1),
        webhook_id=webhook_id,
    ).exists()


def claimable(
    webhook: Webhook, *, now, limit: int, attempt_failed: bool | None = None, in_flight=()
) -> list[tuple]:
    """(id, state, next_attempt_at) of the jobs a claim would take now, oldest first
    (all due ones of a disabled webhook: they are dropped).

    While a delivery of the webhook is failing (it failed an attempt and is not
    finished, or the last deliveries failed), retries go first and a new delivery
    starts only while the failures so far and the deliveries under way stay below
    FAILURES_BEFORE_DISABLE: a dead endpoint gets 5 deliveries x 5 attempts before it
    is disabled, however many events wait for it. `attempt_failed`: what
    attempt_failing would say, when the caller knows (a drain that has seen no failed
    attempt since it looked); None: ask the database. `in_flight`: ids of jobs the
    caller has requests in flight for, never claimed again meanwhile (an attempt that
    outlives its claim's lease is not made a second time by its own drain).
    """
    active = DeliveryJob.objects.filter(webhook_id=webhook.id, state__in=DeliveryJob.ACTIVE_STATES)
    due = active.filter(next_attempt_at__lte=now).order_by("next_attempt_at")
    if in_flight:
        due = due.exclude(id__in=list(in_flight))
    fields = ("id", "state", "next_attempt_at")
    failures = webhook.consecutive_failures
    if not webhook.is_enabled:  # every due job, to be dropped
        return list(due.values_list(*fields)[:limit])
    if attempt_failed is None:
        attempt_failed = attempt_failing(webhook.id)
    failing = failures > 0 or attempt_failed
    if not failing:
        return list(due.values_list(*fields)[:limit])
    candidates = list(due.filter(attempts__gt=0).values_list(*fields)[:limit])
    under_way = active.filter(attempts__gt=0).count()
    room = min(limit - len(candidates), FAILURES_BEFORE_DISABLE - failures - under_way)
    if room > 0:
        candidates += list(due.filter(attempts=0).values_list(*fields)[:room])
    return candidates


def jobs_claim(
    *,
    webhook_id,
    limit: int,
    webhook: Webhook | None = None,
    attempt_failed: bool | None = None,
    in_flight=(),
) -> list[ClaimedJob]:
    """Claim up to `limit` due jobs of one webhook (those claimable names), each for an
    attempt made right away. `webhook`: the row as just read, if the caller has it.

    Conditional UPDATEs (state and due time re-checked by the database), so a job goes
    to exactly one claimer; a job whose previous claim lapsed is told apart by its own
    token, so its lost attempt can be recorded.
    """
    if limit <= 0:
        return []
    if webhook is None:
        webhook = Webhook.objects.filter(id=webhook_id).first()
        if webhook is None:
            return []
    now = timezone.now()
    candidates = claimable(
        webhook, now=now, limit=limit, attempt_failed=attempt_failed, in_flight=in_flight
    )
    if not candidates:
        return []
    fresh_token, lost_token = uuid.uuid4(), uuid.uuid4()
    lease = timedelta(seconds=settings.WEBHOOK_CLAIM_LEASE_SECONDS)
    for state, token in (
        (DeliveryJob.State.PENDING, fresh_token),
        (DeliveryJob.State.DELIVERING, lost_token),
    ):
        ids = [pk for pk, s, _ in candidates if s == state]
        if ids:
            DeliveryJob.objects.filter(id__in=ids, state=state, next_attempt_at__lte=now).update(
                state=DeliveryJob.State.DELIVERING,
                attempts=F("attempts") + 1,
                claim_token=token,
                next_attempt_at=now + lease,
            )
    # A lapsed claim's due time is its lease's end: the claim was made a lease earlier.
    lapsed_at = {pk: due - lease for pk, _, due in candidates}
    claimed = []
    for job in (
        DeliveryJob.objects.select_related("event")
        .filter(claim_token__in=[fresh_token, lost_token])
        .order_by("next_attempt_at", "created_at")
    ):
        lost = job.attempts - 1 if job.claim_token == lost_token else None
        exhausted = lost is not None and lost >= MAX_ATTEMPTS
        claimed.append(
            ClaimedJob(
                job=job,
                lost_attempt=lost,
                lost_at=lapsed_at.get(job.id) if lost is not None else None,
                attempt=None if exhausted else job.attempts,
            )
        )
    return claimed


# ---------------------------------------------------------------- outcomes


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


def jobs_record(*, webhook_id, outcomes: list[tuple[ClaimedJob, AttemptResult | None, str]]):
    """The attempts that came back together: their attempt row(s), each job's next
    state and the webhook's failure count, in one transaction (one INSERT, one UPDATE
    per kind of next state; webhooks.statements.answers_record does the common case in
    one statement). Nothing is written when the webhook is gone."""
    now = timezone.now()
    rows = []
    # (outcome, attempt) -> the (id, claim token) pairs it applies to
    groups: dict[tuple[str, int | None], list[Q]] = {}
    for item, result, outcome in outcomes:
        rows += _attempt_rows(item, result, webhook_id=webhook_id, now=now)
        job = item.job
        attempt = item.attempt if outcome in ("retry", "failed") else None
        groups.setdefault((outcome, attempt), []).append(Q(id=job.id, claim_token=job.claim_token))
    # The failure count follows the deliveries in the order they ended.
    ended = sorted(
        (result.ended_at if result else now, outcome == "succeeded")
        for _, result, outcome in outcomes
        if outcome in ("succeeded", "failed")
    )
    try:
        with transaction.atomic():
            WebhookDelivery.objects.bulk_create(rows)
            for (outcome, attempt), pairs in groups.items():
                jobs = DeliveryJob.objects.filter(reduce(operator.or_, pairs))
                jobs.update(**_next_state(outcome, attempt, now=now))
            previous = None
            for _, succeeded in ended:
                # Consecutive 2xx after a reset find nothing to reset: one UPDATE does.
                if not (succeeded and previous):
                    _count_delivery(webhook_id=webhook_id, succeeded=succeeded, now=now)
                previous = succeeded
        webhook_outcomes_observe(outcomes)
    except IntegrityError:
        pass  # the webhook was deleted meanwhile: nothing left to record


def _attempt_rows(item: ClaimedJob, result: AttemptResult | None, *, webhook_id, now):
    job = item.job
    rows = []
    if item.lost_attempt is not None:
        rows.append(
            WebhookDelivery(
                webhook_id=webhook_id,
                job=job,
                event_type=job.event.type,
                attempt=item.lost_attempt,
                error=LOST_ATTEMPT_ERROR,
                created_at=min(item.lost_at or now, now),
            )
        )
    if result is not None:
        assert item.attempt is not None  # a request was made: for this attempt
        rows.append(
            WebhookDelivery(
                webhook_id=webhook_id,
                job=job,
                event_type=job.event.type,
                attempt=item.attempt,
                **result.row_fields(),
            )
        )
    return rows


def _next_state(outcome: str, attempt: int | None, *, now) -> dict:
    """The job's columns after an outcome. `attempt`: the attempt just made (retry and
    failed), None for a failed job whose claim counted an attempt never made."""
    done = {"claim_token": None, "finished_at": now}
    if outcome == "succeeded":
        return {"state": DeliveryJob.State.SUCCEEDED, **done}
    if outcome == "failed":
        if attempt is None:  # the claim counted an attempt never made
            return {"state": DeliveryJob.State.FAILED, "attempts": F("attempts") - 1, **done}
        return {"state": DeliveryJob.State.FAILED, **done}
    if outcome == "dropped":
        return {"state": DeliveryJob.State.DROPPED, **done}
    assert outcome == "retry" and attempt is not None
    return {
        "state": DeliveryJob.State.PENDING,
        "next_attempt_at": now + timedelta(seconds=retry_delay(attempt)),
        "claim_token": None,
    }


def _count_delivery(*, webhook_id, succeeded: bool, now) -> None:
    """A delivery that ends without a 2xx is one failure; a 2xx resets the count; the
    fifth failure in a row disables the webhook."""
    queryset = Webhook.objects.filter(id=webhook_id)
    if succeeded:
        # Whatever the count is now, including a failure recorded meanwhile. Cheap
        # when there is nothing to reset: the UPDATE matches no row.
        queryset.filter(consecutive_failures__gt=0).update(consecutive_failures=0)
        return
    queryset.update(consecutive_failures=F("consecutive_failures") + 1)
    if queryset.filter(
        consecutive_failures__gte=FAILURES_BEFORE_DISABLE, disabled_at__isnull=True
    ).update(disabled_at=now):
        logger.info(
            "webhook %s disabled after %s failed deliveries", webhook_id, FAILURES_BEFORE_DISABLE
        )
