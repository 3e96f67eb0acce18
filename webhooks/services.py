"""Writes: webhook management, event emission (the outbox) and delivery.

Emission writes an Event and one DeliveryJob per matching enabled webhook in
the caller's transaction, then rings that webhook's drain task after commit.
A drain, in order (docs/webhooks.md):
1. claims a batch of the webhook's due jobs with conditional UPDATEs (a job
   goes to one worker; the claim is a lease, so a dead worker's jobs come due);
2. POSTs each signed envelope with a timeout, no redirects, a capped read;
3. records the attempt rows, the jobs' next states and the webhook's failure
   count in one transaction;
4. goes on until nothing is due (retries due at once included).
The beat sweep rings the drain of any webhook with due jobs the fast path missed.
"""

import json
import logging
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import requests
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone
from urllib3.exceptions import NameResolutionError

from config.api.errors import ValidationFailed
from webhooks.models import EVENT_TYPES, DeliveryJob, Event, Webhook, WebhookDelivery
from webhooks.secrets import secret_encrypt, secret_generate, signature_header
from webhooks.transport import UnsafeAddress, delivery_session

logger = logging.getLogger(__name__)

MAX_ATTEMPTS = 5  # per delivery (SPEC.md section 8)
FAILURES_BEFORE_DISABLE = 5  # consecutive failed deliveries (SPEC.md section 8)
MAX_WEBHOOKS_PER_ACCOUNT = 100
RESPONSE_READ_CAP = 64 * 1024  # bytes of a response body read at most
RESPONSE_EXCERPT_CHARS = 1024  # of which this much is kept for the admin
USER_AGENT = "service-webhooks/1.0"
DRAIN_BATCH_SIZE = 100  # jobs claimed at once by a drain
DRAIN_TIME_BUDGET_SECONDS = 60  # then the drain hands over to a fresh message
# A drain re-reads its webhook this often, so a rotated secret, a new URL or a
# disable reaches the very next attempt after at most this long.
WEBHOOK_REREAD_SECONDS = 0.25
LOST_ATTEMPT_ERROR = "interrupted: the worker was lost during this attempt; outcome unknown"


# ---------------------------------------------------------------- management


@dataclass(frozen=True)
class IssuedSecret:
    webhook: Webhook
    secret: str


def webhook_create(*, account, url: str, event_filters: list[str]) -> IssuedSecret:
    if Webhook.objects.filter(account=account).count() >= MAX_WEBHOOKS_PER_ACCOUNT:
        raise ValidationFailed(
            {"webhook": [f"An account can register at most {MAX_WEBHOOKS_PER_ACCOUNT} webhooks."]}
        )
    secret = secret_generate()
    webhook = Webhook.objects.create(
        account=account,
        url=url,
        event_filters=event_filters,
        secret_encrypted=secret_encrypt(secret),
    )
    return IssuedSecret(webhook=webhook, secret=secret)


_UNSET = object()


def webhook_update(
    *, webhook: Webhook, url=_UNSET, event_filters=_UNSET, disabled_at=_UNSET
) -> Webhook:
    """Changes what is given. `disabled_at=None` re-enables and clears the failure
    count; any timestamp disables (recording the server's time, not the one given).
    The secret never changes here."""
    fields: list[str] = []
    if url is not _UNSET:
        webhook.url = url
        fields.append("url")
    if event_filters is not _UNSET:
        webhook.event_filters = event_filters
        fields.append("event_filters")
    if disabled_at is not _UNSET:
        if disabled_at is None:
            webhook.disabled_at = None
            webhook.consecutive_failures = 0
            fields += ["disabled_at", "consecutive_failures"]
        elif webhook.disabled_at is None:
            webhook.disabled_at = timezone.now()
            fields.append("disabled_at")
    if fields:
        webhook.save(update_fields=fields)
    return webhook


def webhook_rotate_secret(*, webhook: Webhook) -> IssuedSecret:
    """A new secret, effective for the next attempt: the old one signs nothing more."""
    secret = secret_generate()
    webhook.secret_encrypted = secret_encrypt(secret)
    webhook.save(update_fields=["secret_encrypted"])
    return IssuedSecret(webhook=webhook, secret=secret)


def webhook_delete(*, webhook: Webhook) -> None:
    """Deletes the webhook, its delivery jobs and its delivery rows (cascade)."""
    webhook.delete()


# ---------------------------------------------------------------- emission


def event_emit(*, account, event_type: str, data: dict) -> Event:
    """Record an event and queue its delivery to every matching enabled webhook.

    Call it inside the transaction that makes the state change: the event and
    its jobs commit or roll back with it. After commit, each matching webhook's
    drain task is rung (the fast path); if that fails (broker down, process
    killed), the beat sweep finds the due jobs anyway.
    """
    if event_type not in EVENT_TYPES:
        raise ValueError(f"unknown event type {event_type!r}")
    account_id = getattr(account, "pk", account)
    now = timezone.now()
    event = Event.objects.create(account_id=account_id, type=event_type, data=data)
    webhooks = Webhook.objects.filter(account_id=account_id, disabled_at__isnull=True).only(
        "id", "event_filters"
    )
    jobs = [
        DeliveryJob(event=event, webhook_id=w.id, next_attempt_at=now)
        for w in webhooks
        if w.wants(event_type)
    ]
    if jobs:
        DeliveryJob.objects.bulk_create(jobs)
        webhook_ids = [str(job.webhook_id) for job in jobs]
        transaction.on_commit(lambda: drains_enqueue(webhook_ids=webhook_ids), robust=True)
    return event


emit = event_emit


def drains_enqueue(*, webhook_ids: list[str]) -> int:
    """Make sure a drain task is on its way for each webhook; returns how many
    messages were sent.

    A webhook whose drain is already enqueued (and not stale) needs no second
    message: that drain will claim every job due when it starts. Never raises:
    a message the broker refused clears the mark, so the next sweep rings again.
    """
    now = timezone.now()
    stale = now - timedelta(seconds=settings.WEBHOOK_CLAIM_LEASE_SECONDS)
    rung = []
    for webhook_id in dict.fromkeys(webhook_ids):
        if Webhook.objects.filter(
            Q(drain_enqueued_at__isnull=True) | Q(drain_enqueued_at__lte=stale), id=webhook_id
        ).update(drain_enqueued_at=now):
            rung.append(webhook_id)
    return drains_publish(webhook_ids=rung)


def drains_publish(*, webhook_ids: list[str]) -> int:
    """Put a drain message on the broker for each webhook whose enqueued mark the
    caller has just set (drains_enqueue, or a producer that sets the mark in its own
    statement, as the sending engine does). Never raises: a message the broker
    refused clears the mark, so the next sweep rings again."""
    from webhooks.tasks import webhook_drain

    sent = 0
    for webhook_id in webhook_ids:
        try:
            # retry=False: fail at once if the broker is down, do not hold the caller.
            webhook_drain.apply_async((str(webhook_id),), retry=False)
            sent += 1
        except Exception:
            logger.warning(
                "webhook %s drain not enqueued; the sweep will ring again",
                webhook_id,
                exc_info=True,
            )
            Webhook.objects.filter(id=webhook_id).update(drain_enqueued_at=None)
    return sent


def jobs_sweep(*, limit: int = 1000) -> int:
    """Ring the drain of every webhook with due jobs the fast path missed:
    never enqueued (broker down), lost on the broker, retries whose time has
    come, and claims whose lease lapsed (a worker died)."""
    due = (
        DeliveryJob.objects.filter(
            state__in=DeliveryJob.ACTIVE_STATES, next_attempt_at__lte=timezone.now()
        )
        .order_by()
        .values_list("webhook_id", flat=True)
        .distinct()
    )
    webhook_ids = [str(pk) for pk in due[:limit]]
    return drains_enqueue(webhook_ids=webhook_ids) if webhook_ids else 0


# ---------------------------------------------------------------- delivery


def retry_delay(attempts_done: int) -> int:
    """Seconds before attempt `attempts_done + 1`.

    WEBHOOK_RETRY_SCHEDULE gives them outright (its last value repeats if it is
    short); otherwise the polynomial 60 * n**3: 1, 8, 27 and 64 minutes.
    """
    schedule = settings.WEBHOOK_RETRY_SCHEDULE
    if schedule:
        return max(0, int(schedule[min(attempts_done, len(schedule)) - 1]))
    return 60 * attempts_done**3


def envelope_bytes(*, job: DeliveryJob, event: Event) -> bytes:
    envelope = {
        "id": str(job.id),
        "type": event.type,
        "created_at": event.created_at.astimezone(UTC)
        .isoformat(timespec="microseconds")
        .replace("+00:00", "Z"),
        "account_id": str(event.account_id),
        "data": event.data,
    }
    return json.dumps(envelope, separators=(",", ":"), ensure_ascii=False).encode()


@dataclass(frozen=True)
class AttemptResult:
    started_at: datetime
    ended_at: datetime
    status_code: int | None = None
    error: str | None = None
    retryable: bool = False
    excerpt: str = ""
    duration_ms: int = 0

    @property
    def ok(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def _is_retryable_status(code: int) -> bool:
    return code >= 500 or code in (408, 429)


def _connection_error_text(exc: requests.ConnectionError) -> str:
    reason = exc.args[0] if exc.args else exc
    reason = getattr(reason, "reason", reason)  # urllib3's MaxRetryError wraps the cause
    if isinstance(reason, NameResolutionError):
        return "connection failed: the host name does not resolve"
    text = str(reason)
    marker = "Failed to establish a new connection: "
    if marker in text:
        text = text.split(marker, 1)[1]
    return f"connection failed: {text}"[:500]


def http_post_signed(*, url: str, body: bytes, secret: str) -> AttemptResult:
    """One POST of a signed body. Never raises for anything the network does."""
    timeout = settings.WEBHOOK_TIMEOUT_SECONDS
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "Accept-Encoding": "identity",
        "X-Service-Signature": signature_header(
            secret=secret, body=body, timestamp=int(time.time())
        ),
    }
    started = time.monotonic()
    started_at = timezone.now()

    def elapsed() -> int:
        return int((time.monotonic() - started) * 1000)

    def result(**fields) -> AttemptResult:
        return AttemptResult(started_at=started_at, ended_at=timezone.now(), **fields)

    try:
        response = delivery_session().post(
            url,
            data=body,
            headers=headers,
            timeout=(timeout, timeout),
            allow_redirects=False,
            stream=True,
        )
    except UnsafeAddress as e:
        return result(error=f"refused: {e}", duration_ms=elapsed())
    except requests.Timeout:
        return result(error=f"timed out after {timeout:g}s", retryable=True, duration_ms=elapsed())
    except requests.ConnectionError as e:
        return result(error=_connection_error_text(e), retryable=True, duration_ms=elapsed())
    except requests.RequestException as e:
        return result(error=f"request failed: {type(e).__name__}", duration_ms=elapsed())

    code = response.status_code
    try:
        raw = response.raw.read(RESPONSE_READ_CAP, decode_content=False)
    except Exception:  # a body cut short does not change what the status said
        raw = b""
    finally:
        response.close()
    excerpt = raw[:RESPONSE_EXCERPT_CHARS].decode("utf-8", errors="replace")
    if 200 <= code < 300:
        return result(status_code=code, excerpt=excerpt, duration_ms=elapsed())
    retryable = _is_retryable_status(code)
    if 300 <= code < 400:
        error = f"HTTP {code}: redirects are not followed"
    else:
        error = f"HTTP {code}" + ("" if retryable else ": not retried")
    return result(
        status_code=code, error=error, retryable=retryable, excerpt=excerpt, duration_ms=elapsed()
    )


@dataclass
class ClaimedJob:
    job: DeliveryJob
    lost_attempt: int | None  # the attempt a lost worker left unfinished
    lost_at: datetime | None  # when that attempt's claim was made
    attempt: int | None  # the attempt to make now; None when the job is exhausted
    result: AttemptResult | None = None
    outcome: str = ""  # succeeded, failed, retry, dropped, released


def jobs_claim(*, webhook_id, limit: int) -> list[ClaimedJob]:
    """Claim up to `limit` due jobs of one webhook, oldest first.

    Conditional UPDATEs (state and due time re-checked by the database), so a
    job goes to exactly one claimer; a job whose previous claim lapsed is told
    apart by its own token, so its lost attempt can be recorded.
    """
    now = timezone.now()
    candidates = list(
        DeliveryJob.objects.filter(
            webhook_id=webhook_id,
            state__in=DeliveryJob.ACTIVE_STATES,
            next_attempt_at__lte=now,
        )
        .order_by("next_attempt_at")
        .values_list("id", "state", "next_attempt_at")[:limit]
    )
    if not candidates:
        return []
    fresh_token, lost_token = uuid.uuid4(), uuid.uuid4()
    lease_until = now + timedelta(seconds=settings.WEBHOOK_CLAIM_LEASE_SECONDS)
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
                next_attempt_at=lease_until,
            )
    # A lapsed claim's due time is its lease's end: the claim was made a lease earlier.
    lapsed_at = {
        pk: due - timedelta(seconds=settings.WEBHOOK_CLAIM_LEASE_SECONDS)
        for pk, _, due in candidates
    }
    claimed = []
    for job in (
        DeliveryJob.objects.select_related("event", "webhook")
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


def _deliver_claimed(claimed: list[ClaimedJob]) -> None:
    """POST each claimed job in turn (sequentially: one receiver, one keep-alive
    connection). Jobs the lease no longer covers are released untouched."""
    timeout = settings.WEBHOOK_TIMEOUT_SECONDS
    worst_attempt = 2 * timeout + 5  # connect + response, and some slack
    lease_end = time.monotonic() + settings.WEBHOOK_CLAIM_LEASE_SECONDS
    webhook: Webhook | None = claimed[0].job.webhook
    secret = webhook.secret
    read_at = time.monotonic()
    sent_any = False
    for item in claimed:
        if webhook is not None and time.monotonic() - read_at > WEBHOOK_REREAD_SECONDS:
            # A rotated secret, a new URL or a disable applies within this bound.
            webhook = Webhook.objects.filter(id=webhook.id).first()
            secret = webhook.secret if webhook is not None else ""
            read_at = time.monotonic()
        if webhook is None:
            item.outcome = "dropped"  # deleted meanwhile (its jobs went with it)
        elif item.attempt is None:
            item.outcome = "failed"  # a lost fifth attempt: nothing left to try
        elif not webhook.is_enabled:
            item.outcome = "dropped"
        elif sent_any and time.monotonic() + worst_attempt > lease_end:
            # The first job always goes, so a lease shorter than one attempt
            # (a misconfiguration) still makes progress.
            item.outcome = "released"
        else:
            sent_any = True
            item.result = http_post_signed(
                url=webhook.url,
                body=envelope_bytes(job=item.job, event=item.job.event),
                secret=secret,
            )
            if item.result.ok:
                item.outcome = "succeeded"
            elif item.result.retryable and item.attempt < MAX_ATTEMPTS:
                item.outcome = "retry"
            else:
                item.outcome = "failed"


def _record(claimed: list[ClaimedJob]) -> None:
    """Attempt rows, job states and the webhook's failure count, in one transaction."""
    now = timezone.now()
    webhook = claimed[0].job.webhook
    rows = []
    for item in claimed:
        event_type = item.job.event.type
        if item.lost_attempt is not None:
            rows.append(
                WebhookDelivery(
                    webhook=webhook,
                    job=item.job,
                    event_type=event_type,
                    attempt=item.lost_attempt,
                    error=LOST_ATTEMPT_ERROR,
                    created_at=min(item.lost_at or now, now),
                )
            )
        if item.result is not None:
            result = item.result
            rows.append(
                WebhookDelivery(
                    webhook=webhook,
                    job=item.job,
                    event_type=event_type,
                    attempt=item.attempt,
                    status_code=result.status_code,
                    error=result.error,
                    response_excerpt=result.excerpt,
                    duration_ms=result.duration_ms,
                    delivered_at=result.ended_at if result.ok else None,
                    created_at=result.started_at,
                )
            )
    tokens = {item.job.claim_token for item in claimed}

    def jobs(outcome: str, **where):
        ids = [item.job.id for item in claimed if item.outcome == outcome]
        return DeliveryJob.objects.filter(id__in=ids, claim_token__in=tokens, **where)

    with transaction.atomic():
        WebhookDelivery.objects.bulk_create(rows)
        done = {"claim_token": None, "finished_at": now}
        jobs("succeeded").update(state=DeliveryJob.State.SUCCEEDED, **done)
        jobs("failed").update(state=DeliveryJob.State.FAILED, **done)
        jobs("dropped").update(state=DeliveryJob.State.DROPPED, **done)
        exhausted = [item.job.id for item in claimed if item.attempt is None]
        if exhausted:  # the claim counted an attempt that was never made
            DeliveryJob.objects.filter(id__in=exhausted).update(attempts=F("attempts") - 1)
        jobs("released").update(
            state=DeliveryJob.State.PENDING,
            attempts=F("attempts") - 1,
            next_attempt_at=now,
            claim_token=None,
        )
        for attempt in {item.attempt for item in claimed if item.outcome == "retry"}:
            jobs("retry", attempts=attempt).update(
                state=DeliveryJob.State.PENDING,
                next_attempt_at=now + timedelta(seconds=retry_delay(attempt)),
                claim_token=None,
            )
        _count_failures(webhook=webhook, outcomes=[item.outcome for item in claimed], now=now)


def _count_failures(*, webhook: Webhook, outcomes: list[str], now) -> None:
    """A delivery that ends without a 2xx is one failure; a 2xx resets the count;
    the fifth failure in a row disables the webhook."""
    ended = [o for o in outcomes if o in ("succeeded", "failed")]
    if not ended:
        return
    queryset = Webhook.objects.filter(id=webhook.id)
    if "succeeded" in ended:
        last_success = len(ended) - 1 - ended[::-1].index("succeeded")
        failures_after = len(ended) - 1 - last_success
        if failures_after == 0:
            # Reset whatever the count is now, not as read at claim time: a failure
            # recorded meanwhile by another drain is reset too. Cheap when there is
            # nothing to reset: the UPDATE matches no row (and writes none).
            queryset.filter(consecutive_failures__gt=0).update(consecutive_failures=0)
            return
        queryset.update(consecutive_failures=failures_after)
    else:
        queryset.update(consecutive_failures=F("consecutive_failures") + len(ended))
    disabled = queryset.filter(
        consecutive_failures__gte=FAILURES_BEFORE_DISABLE, disabled_at__isnull=True
    ).update(disabled_at=now)
    if disabled:
        logger.info(
            "webhook %s disabled after %s failed deliveries", webhook.id, FAILURES_BEFORE_DISABLE
        )


def webhook_drain(*, webhook_id, batch_size: int = DRAIN_BATCH_SIZE) -> int:
    """Deliver every due job of one webhook, a batch at a time; returns how many
    jobs were worked on.

    The enqueued mark is cleared first, so an event committed from now on rings
    a new drain instead of being missed. Zero-delay retries come due at once
    and are made in the same drain; the attempt limit bounds the loop, and a
    time budget hands what is left to a fresh drain message.
    """
    Webhook.objects.filter(id=webhook_id).update(drain_enqueued_at=None)
    started = time.monotonic()
    worked = 0
    while True:
        claimed = jobs_claim(webhook_id=webhook_id, limit=batch_size)
        if not claimed:
            return worked
        _deliver_claimed(claimed)
        try:
            _record(claimed)
        except IntegrityError:
            return worked  # the webhook was deleted meanwhile: nothing left to record
        worked += len(claimed)
        if all(item.outcome in ("dropped", "released") for item in claimed):
            if any(item.outcome == "released" for item in claimed):
                drains_enqueue(webhook_ids=[str(webhook_id)])
            return worked
        if time.monotonic() - started > DRAIN_TIME_BUDGET_SECONDS:
            drains_enqueue(webhook_ids=[str(webhook_id)])
            return worked


# ---------------------------------------------------------------- operations


def job_redeliver(*, job: DeliveryJob) -> bool:
    """Send a failed delivery again, same envelope id, with a fresh attempt budget
    (its new attempts are numbered from 1 again). Only failed jobs of enabled
    webhooks; returns whether it was queued."""
    if not job.webhook.is_enabled:
        return False
    now = timezone.now()
    reset = DeliveryJob.objects.filter(id=job.id, state=DeliveryJob.State.FAILED).update(
        state=DeliveryJob.State.PENDING,
        attempts=0,
        next_attempt_at=now,
        finished_at=None,
        claim_token=None,
    )
    if reset:
        webhook_ids = [str(job.webhook_id)]
        transaction.on_commit(lambda: drains_enqueue(webhook_ids=webhook_ids), robust=True)
    return bool(reset)


def jobs_redeliver_failed(*, since: datetime, until: datetime) -> int:
    """Redeliver every failed delivery of events created in [since, until)."""
    jobs = DeliveryJob.objects.select_related("webhook").filter(
        state=DeliveryJob.State.FAILED, created_at__gte=since, created_at__lt=until
    )
    return sum(job_redeliver(job=job) for job in jobs.iterator())


@dataclass(frozen=True)
class PruneCounts:
    deliveries: int
    jobs: int
    events: int


def deliveries_prune(*, older_than: datetime, batch: int = 5000) -> PruneCounts:
    """Delete attempt rows, finished jobs and events left without jobs, all older
    than `older_than`. Jobs still pending or delivering are kept, and so are
    their events. Deletes in batches so no transaction grows unbounded."""

    def delete_in_batches(queryset) -> int:
        total = 0
        while True:
            ids = list(queryset.values_list("pk", flat=True)[:batch])
            if not ids:
                return total
            total += (
                queryset.model.objects.filter(pk__in=ids)
                .delete()[1]
                .get(queryset.model._meta.label, 0)
            )

    deliveries = delete_in_batches(WebhookDelivery.objects.filter(created_at__lt=older_than))
    jobs = delete_in_batches(
        DeliveryJob.objects.filter(created_at__lt=older_than).exclude(
            state__in=DeliveryJob.ACTIVE_STATES
        )
    )
    events = delete_in_batches(Event.objects.filter(created_at__lt=older_than, jobs__isnull=True))
    return PruneCounts(deliveries=deliveries, jobs=jobs, events=events)
