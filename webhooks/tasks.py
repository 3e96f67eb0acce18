"""Celery tasks: they take ids and call a service. Routed to the `webhooks` queue."""

import logging

from celery import shared_task

from webhooks import services

logger = logging.getLogger(__name__)


@shared_task(name="webhooks.tasks.webhook_deliver", ignore_result=True)
def webhook_deliver(job_id: str) -> str:
    """Make the job's next attempt. A retry that is due at once (zero delay) is
    made here; later ones wait in the database for the sweep."""
    outcome = services.delivery_attempt(job_id=job_id)
    while outcome == "retry_scheduled":
        # Due already (a zero delay)? Attempt again now; otherwise this is "not_due".
        outcome = services.delivery_attempt(job_id=job_id)
    logger.debug("webhook job %s: %s", job_id, outcome)
    return outcome


@shared_task(name="webhooks.tasks.webhook_sweep", ignore_result=True)
def webhook_sweep() -> int:
    """Enqueue due jobs the fast path missed (beat, every WEBHOOK_SWEEP_INTERVAL_SECONDS)."""
    return services.jobs_sweep()
