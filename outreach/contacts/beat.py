"""Beat task of contact imports (it queues the tasks of outreach.contacts.tasks)."""

from celery import shared_task

from outreach.contacts import import_queue


@shared_task(name="outreach.tasks.import_redrive_stale")
def import_redrive_stale() -> None:
    """Beat: re-queue imports whose worker died or whose task was lost."""
    import_queue.contact_imports_redrive()
