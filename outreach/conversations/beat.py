"""Beat task of conversations: the retention purge of reply bodies."""

from celery import shared_task

from outreach.conversations.retention import replies_purge


@shared_task(name="outreach.tasks.replies_purge")
def replies_purge_task() -> int:
    """Beat, hourly: purge reply bodies past REPLY_RETENTION_DAYS."""
    return replies_purge()
