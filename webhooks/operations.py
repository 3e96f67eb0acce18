"""Operations: redelivering failed deliveries and pruning old rows."""

import logging
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from webhooks.events import drains_enqueue
from webhooks.models import DeliveryJob, Event, WebhookDelivery

logger = logging.getLogger(__name__)


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
