"""Celery tasks: they take ids and call a service. Routed to the `webhooks` queue."""

from celery import shared_task

from webhooks import delivery, events, operations


@shared_task(name=events.DRAIN_TASK, ignore_result=True, bind=True)
def webhook_drain(self, webhook_id: str) -> int:
    """Deliver the webhook's due jobs (the fast path, rung after each emit's commit).
    Run eagerly (inside the producer's own thread) it does not wait for more."""
    linger = 0.0 if self.request.is_eager else None
    return delivery.webhook_drain(webhook_id=webhook_id, linger=linger)


@shared_task(name="webhooks.tasks.webhook_sweep", ignore_result=True)
def webhook_sweep() -> int:
    """Ring the drains the fast path missed (beat, every WEBHOOK_SWEEP_INTERVAL_SECONDS)."""
    return events.jobs_sweep()


@shared_task(name=operations.TEST_TASK, ignore_result=True)
def webhook_test_deliver(delivery_id: str) -> None:
    """Make a test delivery's POST (POST /webhooks/:id/test queued it)."""
    operations.test_delivery_make(delivery_id=delivery_id)
