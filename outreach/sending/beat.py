"""Beat task of sending: the scheduler run (it queues outreach.sending.tasks.send_mailboxes)."""

from celery import shared_task

from outreach.sending.scheduler import schedule_due


@shared_task(name="outreach.tasks.schedule_sends", ignore_result=True)
def schedule_sends() -> int:
    """Beat (every SENDING_SCHEDULE_INTERVAL_SECONDS): claim due enrollments and queue
    the mailboxes' batches to sending tasks. Returns the number of batches queued."""
    return len(schedule_due(enqueue=True))
