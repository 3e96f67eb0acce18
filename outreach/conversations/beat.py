"""Beat tasks of conversations: the retention purge of reply bodies, the recovery of
responses."""

from celery import shared_task

from outreach.conversations.respond import responses_recover
from outreach.conversations.retention import replies_purge


@shared_task(name="outreach.tasks.replies_purge")
def replies_purge_task() -> int:
    """Beat, hourly: purge reply bodies past REPLY_RETENTION_DAYS."""
    return replies_purge()


@shared_task(name="outreach.tasks.responses_recover", ignore_result=True)
def responses_recover_task() -> int:
    """Beat (every SENDING_SCHEDULE_INTERVAL_SECONDS): responses whose worker was lost
    recorded as sent (reply unseen), due ones queued. Returns how many were queued."""
    return responses_recover()[1]
