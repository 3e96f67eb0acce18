"""Delivery: one drain per webhook, many requests in flight per worker.

A drain owns its webhook while it runs (a lease on the Webhook row: `drain_token`,
`drain_until`, renewed as it goes), so two drains never work one endpoint. In a loop:

1. it claims due jobs, never more than it has free lanes (WEBHOOK_MAX_IN_FLIGHT): a
   claim counts the attempt it is about to make, and that request leaves at once, so
   an attempt is counted only for a request that is actually made;
2. each request goes to the worker's HTTP pool (threads, WEBHOOK_MAX_CONCURRENT_REQUESTS
   in all), which only talks HTTP; the drain's own thread does every database write;
3. outcomes are recorded as soon as they come back, those that came back together in
   one transaction (the attempt rows, each job's next state, the webhook's failure
   count): a killed worker re-sends at most the requests that were in flight;
4. it ends when nothing is due and nothing is in flight (it releases the lease, then
   looks once more, so an event committed meanwhile is not left waiting), after
   DRAIN_TIME_BUDGET_SECONDS (a fresh drain message takes over), or when the worker
   shuts down (it stops claiming, finishes what is in flight and rings a drain for the
   rest).

A slow or hanging endpoint holds only its own lanes. While FAILURES_BEFORE_DISABLE of
its deliveries wait for a retry, a webhook starts no new delivery: a dead endpoint is
disabled after about 5 deliveries x 5 attempts, not after every queued event was tried.
"""

import logging
import operator
import threading
import time
import uuid
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import reduce

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from config.db import connection_release
from config.worker import stopping
from webhooks.models import DeliveryJob, Webhook, WebhookDelivery
from webhooks.services import (
    AttemptResult,
    drains_enqueue,
    envelope_bytes,
    http_post_signed,
    retry_delay,
)

logger = logging.getLogger(__name__)

MAX_ATTEMPTS = 5  # per delivery
FAILURES_BEFORE_DISABLE = 5  # consecutive failed deliveries
DRAIN_TIME_BUDGET_SECONDS = 60  # then the drain hands over to a fresh message
# The drain's lease on its webhook (30 s, or the claim lease when that is shorter);
# renewed every third of it while the drain runs, so a drain whose worker died is
# replaced by the next sweep after at most this long.
DRAIN_LEASE_SECONDS = 30
# The drain wakes at least this often to renew its lease and look for new jobs.
DRAIN_POLL_SECONDS = 0.5
LOST_ATTEMPT_ERROR = "interrupted: the worker was lost during this attempt; outcome unknown"


# ---------------------------------------------------------------- the HTTP pool

_http_pool: ThreadPoolExecutor | None = None
_http_pool_lock = threading.Lock()


def http_pool() -> ThreadPoolExecutor:
    """The process's request threads (created on first use, never in a parent that
    forks: a forked child would inherit a pool without its threads)."""
    global _http_pool
    with _http_pool_lock:
        if _http_pool is None:
            _http_pool = ThreadPoolExecutor(
                max_workers=settings.WEBHOOK_MAX_CONCURRENT_REQUESTS,
                thread_name_prefix="webhook-http",
            )
        return _http_pool


# ---------------------------------------------------------------- claims


@dataclass
class ClaimedJob:
    job: DeliveryJob
    lost_attempt: int | None  # the attempt a lost worker left unfinished
    lost_at: datetime | None  # when that attempt's claim was made
    attempt: int | None  # the attempt to make now; None when the job is exhausted


def _attempt_failed(webhook_id) -> bool:
    """Whether a delivery of the webhook failed an attempt and is not finished."""
    return DeliveryJob.objects.filter(
        Q(state=DeliveryJob.State.PENDING, attempts__gt=0)
        | Q(state=DeliveryJob.State.DELIVERING, attempts__gt=1),
        webhook_id=webhook_id,
    ).exists()


def _claimable(
    webhook: Webhook, *, now, limit: int, attempt_failed: bool | None = None, in_flight=()
) -> list[tuple]:
    """(id, state, next_attempt_at) of the jobs a claim would take now, oldest first
    (all due ones of a disabled webhook: they are dropped).

    While a delivery of the webhook is failing (it failed an attempt and is not
    finished, or the last deliveries failed), retries go first and a new delivery
    starts only while the failures so far and the deliveries under way stay below
    FAILURES_BEFORE_DISABLE: a dead endpoint gets 5 deliveries x 5 attempts before it
    is disabled, however many events wait for it. `attempt_failed`: what
    _attempt_failed would say, when the caller knows (a drain that has seen no failed
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
        attempt_failed = _attempt_failed(webhook.id)
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
    """Claim up to `limit` due jobs of one webhook (those _claimable names), each for an
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
    candidates = _claimable(
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


def _outcome(item: ClaimedJob, result: AttemptResult | None, webhook: Webhook | None) -> str:
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
    per kind of next state). Nothing is written when the webhook is gone."""
    now = timezone.now()
    rows = []
    # (outcome, attempt) -> the (id, claim token) pairs it applies to
    groups: dict[tuple[str, int | None], list[Q]] = {}
    for item, result, outcome in outcomes:
        rows += _attempt_rows(item, result, webhook_id=webhook_id, now=now)
        job = item.job
        attempt = item.attempt if outcome in ("retry", "failed") else None
        mine = Q(id=job.id, claim_token=job.claim_token)
        groups.setdefault((outcome, attempt), []).append(mine)
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
                mine = DeliveryJob.objects.filter(reduce(operator.or_, pairs))
                mine.update(**_next_state(outcome, attempt, now=now))
            previous = None
            for _, succeeded in ended:
                # Consecutive 2xx after a reset find nothing to reset: one UPDATE does.
                if not (succeeded and previous):
                    _count_delivery(webhook_id=webhook_id, succeeded=succeeded, now=now)
                previous = succeeded
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
        rows.append(
            WebhookDelivery(
                webhook_id=webhook_id,
                job=job,
                event_type=job.event.type,
                attempt=item.attempt,
                status_code=result.status_code,
                error=result.error,
                response_excerpt=result.excerpt,
                duration_ms=result.duration_ms,
                delivered_at=result.ended_at if result.ok else None,
                created_at=result.started_at,
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


# ---------------------------------------------------------------- the drain's lease


def _drain_lease() -> timedelta:
    return timedelta(seconds=min(DRAIN_LEASE_SECONDS, settings.WEBHOOK_CLAIM_LEASE_SECONDS))


def _lease_take(webhook_id, token: uuid.UUID) -> bool:
    now = timezone.now()
    return bool(
        Webhook.objects.filter(
            Q(drain_until__isnull=True) | Q(drain_until__lte=now) | Q(drain_token=token),
            id=webhook_id,
        ).update(
            drain_token=token,
            drain_until=now + _drain_lease(),
            drain_enqueued_at=None,
        )
    )


def _lease_renew(webhook_id, token: uuid.UUID) -> bool:
    return bool(
        Webhook.objects.filter(id=webhook_id, drain_token=token).update(
            drain_until=timezone.now() + _drain_lease()
        )
    )


def _lease_release(webhook_id, token: uuid.UUID) -> None:
    Webhook.objects.filter(id=webhook_id, drain_token=token).update(
        drain_token=None, drain_until=None
    )


def _due_exists(webhook_id) -> bool:
    webhook = Webhook.objects.filter(id=webhook_id).first()
    return webhook is not None and bool(_claimable(webhook, now=timezone.now(), limit=1))


# ---------------------------------------------------------------- the drain


def webhook_drain(*, webhook_id, lanes: int | None = None) -> int:
    """Deliver every due job of one webhook (module docstring); returns how many jobs
    were worked on. Returns 0 at once when another drain holds the webhook."""
    token = uuid.uuid4()
    worked = 0
    while _lease_take(webhook_id, token):
        try:
            done, handed_over = _drain_leased(
                webhook_id, token, lanes or settings.WEBHOOK_MAX_IN_FLIGHT
            )
            worked += done
        finally:
            _lease_release(webhook_id, token)
        if not _due_exists(webhook_id):
            break
        if handed_over:
            # Time budget spent, or the worker is stopping: a fresh message takes
            # over the rest, on any worker.
            drains_enqueue(webhook_ids=[str(webhook_id)])
            break
        # An event committed while the lease was held rang no drain (drains_enqueue
        # skips a webhook that has one): look again now that the lease is released.
    return worked


def _drain_leased(webhook_id, token: uuid.UUID, lanes: int) -> tuple[int, bool]:
    """The drain's loop, under its lease. Returns (jobs worked on, handed over)."""
    started = renewed = time.monotonic()
    in_flight: dict[Future, ClaimedJob] = {}
    webhook = None
    worked = 0
    # Only this drain makes attempts while it holds the lease: once it knows no attempt
    # failed, it needs to ask again only after one of its own fails.
    attempt_failed: bool | None = None if _attempt_failed(webhook_id) else False
    handing_over = False
    while True:
        now = time.monotonic()
        if now - renewed > _drain_lease().total_seconds() / 3:
            if not _lease_renew(webhook_id, token):
                handing_over = True  # the lease lapsed and was taken: finish, leave
            renewed = now
        if now - started > DRAIN_TIME_BUDGET_SECONDS or stopping.is_set():
            handing_over = True
        claimed = []
        if not handing_over and len(in_flight) < lanes:
            # Read before each claim: a rotated secret, a new URL or a disable applies
            # to the very next request.
            webhook = Webhook.objects.filter(id=webhook_id).first()
            if webhook is not None:
                claimed = jobs_claim(
                    webhook_id=webhook_id,
                    limit=lanes - len(in_flight),
                    webhook=webhook,
                    attempt_failed=attempt_failed,
                    in_flight={item.job.id for item in in_flight.values()},
                )
        unsent = []  # claimed jobs that need no request
        for item in claimed:
            worked += 1
            if item.lost_attempt is not None:
                attempt_failed = None
            if item.attempt is None or not webhook.is_enabled:
                unsent.append((item, None, _outcome(item, None, webhook)))
                continue
            body = envelope_bytes(job=item.job, event=item.job.event)
            future = http_pool().submit(
                http_post_signed, url=webhook.url, body=body, secret=webhook.secret
            )
            in_flight[future] = item
        if unsent:
            jobs_record(webhook_id=webhook_id, outcomes=unsent)
        if not in_flight:
            if claimed and not handing_over:
                continue  # what it claimed needed no request: claim again
            return worked, handing_over
        # Wait for responses without holding a database connection.
        connection_release()
        done, _ = wait(in_flight, timeout=DRAIN_POLL_SECONDS, return_when=FIRST_COMPLETED)
        # Everything that came back meanwhile is recorded together, then claimed for
        # together: the drain's database work is per wake-up, not per request.
        outcomes = []
        for future in done:
            item = in_flight.pop(future)
            result = future.result()
            outcomes.append((item, result, _outcome(item, result, webhook)))
        if outcomes:
            jobs_record(webhook_id=webhook_id, outcomes=outcomes)
        if any(outcome in ("retry", "failed") for _, _, outcome in outcomes):
            attempt_failed = None
