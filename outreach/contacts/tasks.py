"""Celery tasks of contact imports: take ids, call a service. outreach.tasks.import_* run
on the `imports` queue (CELERY_TASK_ROUTES)."""

from celery import shared_task

from outreach.contacts import imports


@shared_task(name="outreach.tasks.import_contacts", acks_late=True)
def import_contacts(import_id: str) -> None:
    """Process one contact import. Safe to run twice: only one run holds the claim."""
    imports.contact_import_run(import_id=import_id)
