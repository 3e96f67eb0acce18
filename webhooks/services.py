"""Writes: webhook management, event emission (the outbox) and delivery.

Emission writes an Event and one DeliveryJob per matching enabled webhook in
the caller's transaction, then rings that webhook's drain task after commit.
The drains themselves are in webhooks.delivery; here is what they call: the
signed POST (`http_post_signed`), the envelope and the retry schedule. The beat
sweep rings the drain of any webhook with due jobs the fast path missed.
"""

import json
import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import requests
from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from urllib3.exceptions import NameResolutionError

from config.api.errors import ValidationFailed
from webhooks.models import EVENT_TYPES, DeliveryJob, Event, Webhook, WebhookDelivery
from webhooks.secrets import secret_generate, signature_header
from webhooks.transport import UnsafeAddress, delivery_session

logger = logging.getLogger(__name__)

MAX_WEBHOOKS_PER_ACCOUNT = 100
RESPONSE_READ_CAP = 64 * 1024  # bytes of a response body read at most
RESPONSE_EXCERPT_CHARS = 1024  # of which this much is kept for the admin
USER_AGENT = "service-webhooks/1.0"


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
        secret=secret,
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
    webhook.secret = secret
    webhook.save(update_fields=["secret"])
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

    A webhook whose drain is already enqueued (and not stale), or running (its
    lease is live), needs no second message: that drain claims every job due
    while it runs, and looks once more after releasing its lease. Never raises:
    a message the broker refused clears the mark, so the next sweep rings again.
    """
    now = timezone.now()
    stale = now - timedelta(seconds=settings.WEBHOOK_CLAIM_LEASE_SECONDS)
    rung = []
    for webhook_id in dict.fromkeys(webhook_ids):
        if Webhook.objects.filter(
            Q(drain_enqueued_at__isnull=True) | Q(drain_enqueued_at__lte=stale),
            Q(drain_until__isnull=True) | Q(drain_until__lte=now),
            id=webhook_id,
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
