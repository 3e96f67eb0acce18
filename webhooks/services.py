"""Writes: webhook management, event emission (the outbox) and delivery.

Delivery, in order (docs/webhooks.md):
1. claim the job with a conditional UPDATE (only one worker wins an attempt);
2. POST the signed envelope with a timeout, no redirects, a capped read;
3. record one WebhookDelivery row and the job's next state in one transaction;
4. count a failed delivery on the webhook, disabling it at the fifth in a row.
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
    its jobs commit or roll back with it. After commit, a task is enqueued per
    job (the fast path); if that fails (broker down, process killed), the beat
    sweep finds the job anyway.
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
        DeliveryJob(event=event, webhook_id=w.id, next_attempt_at=now, enqueued_at=now)
        for w in webhooks
        if w.wants(event_type)
    ]
    if jobs:
        DeliveryJob.objects.bulk_create(jobs)
        job_ids = [str(job.id) for job in jobs]
        transaction.on_commit(lambda: delivery_enqueue(job_ids=job_ids), robust=True)
    return event


emit = event_emit


def delivery_enqueue(*, job_ids: list[str]) -> int:
    """Put a deliver task on the broker per job; returns how many made it.

    Never raises: a job whose task could not be sent loses its enqueued_at
    mark, so the next sweep sends it instead.
    """
    from webhooks.tasks import webhook_deliver

    sent = 0
    for job_id in job_ids:
        try:
            # retry=False: fail at once if the broker is down, do not hold the caller.
            webhook_deliver.apply_async((job_id,), retry=False)
            sent += 1
        except Exception:
            logger.warning(
                "webhook job %s not enqueued; the sweep will pick it up", job_id, exc_info=True
            )
            DeliveryJob.objects.filter(id=job_id, state=DeliveryJob.State.PENDING).update(
                enqueued_at=None
            )
    return sent


def jobs_sweep(*, limit: int = 1000) -> int:
    """Enqueue due jobs the fast path missed: never enqueued (broker down), lost
    on the broker, retries whose time has come, and claims whose lease lapsed."""
    now = timezone.now()
    stale = now - timedelta(seconds=settings.WEBHOOK_CLAIM_LEASE_SECONDS)
    due = DeliveryJob.objects.filter(
        Q(enqueued_at__isnull=True) | Q(enqueued_at__lte=stale),
        state__in=DeliveryJob.ACTIVE_STATES,
        next_attempt_at__lte=now,
    )
    job_ids = [
        str(pk) for pk in due.order_by("next_attempt_at").values_list("id", flat=True)[:limit]
    ]
    if not job_ids:
        return 0
    DeliveryJob.objects.filter(id__in=job_ids).update(enqueued_at=now)
    return delivery_enqueue(job_ids=job_ids)


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

    def elapsed() -> int:
        return int((time.monotonic() - started) * 1000)

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
        return AttemptResult(error=f"refused: {e}", duration_ms=elapsed())
    except requests.Timeout:
        return AttemptResult(
            error=f"timed out after {timeout:g}s", retryable=True, duration_ms=elapsed()
        )
    except requests.ConnectionError as e:
        return AttemptResult(error=_connection_error_text(e), retryable=True, duration_ms=elapsed())
    except requests.RequestException as e:
        return AttemptResult(error=f"request failed: {type(e).__name__}", duration_ms=elapsed())

    code = response.status_code
    try:
        raw = response.raw.read(RESPONSE_READ_CAP, decode_content=False)
    except Exception:  # a body cut short does not change what the status said
        raw = b""
    finally:
        response.close()
    excerpt = raw[:RESPONSE_EXCERPT_CHARS].decode("utf-8", errors="replace")
    if 200 <= code < 300:
        return AttemptResult(status_code=code, excerpt=excerpt, duration_ms=elapsed())
    retryable = _is_retryable_status(code)
    if 300 <= code < 400:
        error = f"HTTP {code}: redirects are not followed"
    else:
        error = f"HTTP {code}" + ("" if retryable else ": not retried")
    return AttemptResult(
        status_code=code, error=error, retryable=retryable, excerpt=excerpt, duration_ms=elapsed()
    )


def delivery_attempt(*, job_id) -> str:
    """Claim the job and make its next attempt. Returns what happened, for logs.

    Safe to call any number of times for the same job: only a due, unclaimed
    job (or one whose claim lease lapsed) is worked on, by one caller at a time.
    """
    now = timezone.now()
    job = DeliveryJob.objects.select_related("event", "webhook").filter(id=job_id).first()
    if job is None:
        return "gone"
    if job.state not in DeliveryJob.ACTIVE_STATES or job.next_attempt_at > now:
        return "not_due"

    # 1. Claim: compare-and-set on what we read, so one worker wins this attempt.
    lost = job.state == DeliveryJob.State.DELIVERING  # the previous claim's lease lapsed
    exhausted = lost and job.attempts >= MAX_ATTEMPTS
    attempt = job.attempts if exhausted else job.attempts + 1
    token = uuid.uuid4()
    claimed = DeliveryJob.objects.filter(
        id=job.id, state=job.state, attempts=job.attempts, next_attempt_at__lte=now
    ).update(
        state=DeliveryJob.State.DELIVERING,
        attempts=attempt,
        claim_token=token,
        next_attempt_at=now + timedelta(seconds=settings.WEBHOOK_CLAIM_LEASE_SECONDS),
        enqueued_at=None,
    )
    if not claimed:
        return "claimed_elsewhere"

    webhook, event = job.webhook, job.event
    if lost:
        WebhookDelivery.objects.create(
            webhook=webhook,
            job=job,
            event_type=event.type,
            attempt=job.attempts,
            error=LOST_ATTEMPT_ERROR,
        )
        if exhausted:
            return _finish(job=job, token=token, webhook=webhook, succeeded=False)

    if not webhook.is_enabled:
        DeliveryJob.objects.filter(id=job.id, claim_token=token).update(
            state=DeliveryJob.State.DROPPED, finished_at=timezone.now(), claim_token=None
        )
        return "dropped"

    # 2. Send, signed with the secret as it is now.
    result = http_post_signed(
        url=webhook.url, body=envelope_bytes(job=job, event=event), secret=webhook.secret
    )

    # 3. Record the attempt and the job's next state together.
    try:
        with transaction.atomic():
            WebhookDelivery.objects.create(
                webhook=webhook,
                job=job,
                event_type=event.type,
                attempt=attempt,
                status_code=result.status_code,
                error=result.error,
                response_excerpt=result.excerpt,
                duration_ms=result.duration_ms,
                delivered_at=timezone.now() if result.ok else None,
            )
            if result.ok:
                return _finish(job=job, token=token, webhook=webhook, succeeded=True)
            if result.retryable and attempt < MAX_ATTEMPTS:
                DeliveryJob.objects.filter(id=job.id, claim_token=token).update(
                    state=DeliveryJob.State.PENDING,
                    next_attempt_at=timezone.now() + timedelta(seconds=retry_delay(attempt)),
                )
                return "retry_scheduled"
            return _finish(job=job, token=token, webhook=webhook, succeeded=False)
    except IntegrityError:
        # The webhook was deleted while we were sending: nothing left to record.
        return "gone"


def _finish(*, job: DeliveryJob, token: uuid.UUID, webhook: Webhook, succeeded: bool) -> str:
    """End the job; count the delivery on the webhook if this claim still owns it."""
    now = timezone.now()
    owned = DeliveryJob.objects.filter(id=job.id, claim_token=token).update(
        state=DeliveryJob.State.SUCCEEDED if succeeded else DeliveryJob.State.FAILED,
        finished_at=now,
        claim_token=None,
    )
    if not owned:
        return "superseded"  # our lease lapsed and another worker took over
    if succeeded:
        Webhook.objects.filter(id=webhook.id, consecutive_failures__gt=0).update(
            consecutive_failures=0
        )
        return "delivered"
    Webhook.objects.filter(id=webhook.id).update(consecutive_failures=F("consecutive_failures") + 1)
    disabled = Webhook.objects.filter(
        id=webhook.id,
        consecutive_failures__gte=FAILURES_BEFORE_DISABLE,
        disabled_at__isnull=True,
    ).update(disabled_at=now)
    if disabled:
        logger.info(
            "webhook %s disabled after %s failed deliveries", webhook.id, FAILURES_BEFORE_DISABLE
        )
    return "failed"


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
        enqueued_at=now,
        finished_at=None,
        claim_token=None,
    )
    if reset:
        transaction.on_commit(lambda: delivery_enqueue(job_ids=[str(job.id)]), robust=True)
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
