"""Operations: test deliveries, redelivering one delivery, replaying failures, and
pruning old rows."""

import json
import logging
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from celery import current_app
from django.db import transaction
from django.utils import timezone

from config.db import connection_release
from config.timestamps import utc_timestamp
from webhooks.catalog import example_data
from webhooks.errors import DeliveryNotRedeliverable, WebhookDisabled
from webhooks.events import drains_enqueue
from webhooks.models import DeliveryJob, Event, Webhook, WebhookDelivery
from webhooks.posting import http_post_signed

logger = logging.getLogger(__name__)

# Jobs a redelivery may start again: every finished one (a receiver may have lost a
# delivery it answered 2xx to).
FINISHED_STATES = (
    DeliveryJob.State.FAILED,
    DeliveryJob.State.SUCCEEDED,
    DeliveryJob.State.DROPPED,
)
REPLAY_MAX_PER_CALL = 1000


def _fresh_start(now) -> dict:
    """A finished job's columns for a new attempt series, due now."""
    return {
        "state": DeliveryJob.State.PENDING,
        "attempts": 0,
        "next_attempt_at": now,
        "finished_at": None,
        "claim_token": None,
    }


def job_redeliver(*, job: DeliveryJob, states=(DeliveryJob.State.FAILED,)) -> bool:
    """Send a finished delivery again, same envelope id, with a fresh attempt budget
    (its new attempts are numbered from 1 again). Only jobs in `states` (failed ones
    by default) of enabled webhooks; returns whether it was queued."""
    if not job.webhook.is_enabled:
        return False
    now = timezone.now()
    reset = DeliveryJob.objects.filter(id=job.id, state__in=states).update(**_fresh_start(now))
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


def delivery_redeliver(*, delivery: WebhookDelivery) -> DeliveryJob:
    """POST /webhooks/:id/deliveries/:delivery_id/redeliver: the attempt's event
    delivered again (job_redeliver, any finished state). Raises WebhookDisabled, or
    DeliveryNotRedeliverable when the delivery is a test, its job was pruned, or it is
    still under way."""
    webhook = delivery.webhook
    if not webhook.is_enabled:
        raise WebhookDisabled()
    if delivery.test:
        raise DeliveryNotRedeliverable(
            "A test delivery is not redelivered; send another test instead.",
            details={"reason": "test"},
        )
    job = (
        DeliveryJob.objects.select_related("webhook").filter(id=delivery.job_id).first()
        if delivery.job_id
        else None
    )
    if job is None:
        raise DeliveryNotRedeliverable(
            "This delivery's event has been pruned.", details={"reason": "pruned"}
        )
    if not job_redeliver(job=job, states=FINISHED_STATES):
        raise DeliveryNotRedeliverable(
            "This delivery is still under way: its next attempt is already scheduled.",
            details={"reason": "in_progress"},
        )
    job.refresh_from_db()
    return job


@dataclass(frozen=True)
class Replayed:
    replayed: int
    has_more: bool


def webhook_replay(*, webhook: Webhook, since: datetime) -> Replayed:
    """POST /webhooks/:id/replay: every delivery of the webhook that ended failed at or
    after `since`, delivered again (same envelope ids, fresh attempt budgets), oldest
    first, at most REPLAY_MAX_PER_CALL per call (`has_more` says to call again)."""
    if not webhook.is_enabled:
        raise WebhookDisabled()
    failed = DeliveryJob.objects.filter(
        webhook=webhook, state=DeliveryJob.State.FAILED, finished_at__gte=since
    )
    ids = list(
        failed.order_by("finished_at", "id").values_list("id", flat=True)[: REPLAY_MAX_PER_CALL + 1]
    )
    has_more = len(ids) > REPLAY_MAX_PER_CALL
    ids = ids[:REPLAY_MAX_PER_CALL]
    replayed = DeliveryJob.objects.filter(id__in=ids, state=DeliveryJob.State.FAILED).update(
        **_fresh_start(timezone.now())
    )
    if replayed:
        webhook_ids = [str(webhook.id)]
        transaction.on_commit(lambda: drains_enqueue(webhook_ids=webhook_ids), robust=True)
    return Replayed(replayed=replayed, has_more=has_more)


TEST_TASK = "webhooks.tasks.webhook_test_deliver"
TEST_NOT_QUEUED_ERROR = "not sent: the webhooks queue could not be reached; send another test"
# A test no worker made within this long never will be (its message was lost with the
# broker, or the worker that took it died): it reads as failed, not pending for ever.
TEST_PENDING_MAX = timedelta(minutes=10)
TEST_LOST_ERROR = "not sent: no webhooks worker made it within 10 minutes; send another test"


def webhook_test_send(*, webhook: Webhook, event_type: str) -> WebhookDelivery:
    """POST /webhooks/:id/test: one signed delivery of the type's example event, handed
    to the webhooks workers (never made in the caller's thread: a slow receiver holds a
    worker's thread, WEBHOOK_TIMEOUT_SECONDS at most, not a web thread). Returns the
    attempt row, pending (`state`); the worker fills it in (test_delivery_make). It
    never counts toward consecutive_failures and never disables. A disabled webhook can
    be tested too (to check a fix before enabling it again)."""
    delivery = WebhookDelivery.objects.create(
        webhook=webhook, job=None, event_type=event_type, attempt=1, test=True
    )
    transaction.on_commit(lambda: _test_enqueue(delivery_id=str(delivery.id)))
    return delivery


def _test_enqueue(*, delivery_id: str) -> None:
    """The test's message, by the task's name (as drains_publish sends drains); a broker
    that refuses it ends the attempt at once, so it is never pending for ever."""
    try:
        current_app.signature(TEST_TASK).apply_async((delivery_id,), retry=False)
    except Exception:
        logger.warning("test delivery %s not enqueued", delivery_id, exc_info=True)
        WebhookDelivery.objects.filter(id=delivery_id, error__isnull=True).update(
            error=TEST_NOT_QUEUED_ERROR, duration_ms=0
        )


def test_delivery_settle(*, delivery: WebhookDelivery) -> WebhookDelivery:
    """A test attempt read back (GET of one delivery): still pending past
    TEST_PENDING_MAX, it is ended failed (TEST_LOST_ERROR), so a poll always ends. The
    worker's late result, should it come, does not overwrite it (test_delivery_make
    makes pending attempts only)."""
    if not delivery.test or delivery.state != "pending":
        return delivery
    if delivery.created_at > timezone.now() - TEST_PENDING_MAX:
        return delivery
    WebhookDelivery.objects.filter(
        id=delivery.id, status_code__isnull=True, error__isnull=True
    ).update(error=TEST_LOST_ERROR, duration_ms=0)
    delivery.refresh_from_db()
    return delivery


def test_delivery_make(*, delivery_id: str) -> WebhookDelivery | None:
    """The worker's half of a test: the POST of a pending test attempt, recorded on its
    row. None when there is nothing to make (made already, the webhook deleted)."""
    delivery = (
        WebhookDelivery.objects.select_related("webhook")
        .filter(id=delivery_id, test=True, status_code__isnull=True, error__isnull=True)
        .first()
    )
    if delivery is None:
        return None
    webhook = delivery.webhook
    message_id = str(uuid.uuid4())
    envelope = {
        "id": message_id,
        "type": delivery.event_type,
        "created_at": utc_timestamp(timezone.now()),
        "account_id": str(webhook.account_id),
        "data": example_data(delivery.event_type),
    }
    body = json.dumps(envelope, separators=(",", ":"), ensure_ascii=False).encode()
    connection_release()  # no database connection held while the receiver answers
    result = http_post_signed(
        url=webhook.url, body=body, secret=webhook.secret, message_id=message_id
    )
    fields = result.row_fields()
    WebhookDelivery.objects.filter(id=delivery.id).update(**fields)
    for name, value in fields.items():
        setattr(delivery, name, value)
    return delivery


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
