"""Celery tasks: take ids, call a service. Names matter: outreach.tasks.import_* run on
the `imports` queue (CELERY_TASK_ROUTES)."""

from celery import shared_task

from outreach import services


@shared_task(name="outreach.tasks.import_contacts", acks_late=True)
def import_contacts(import_id: str) -> None:
    """Process one contact import. Safe to run twice: only one run holds the claim."""
    services.contact_import_run(import_id=import_id)


@shared_task(name="outreach.tasks.import_redrive_stale")
def import_redrive_stale() -> None:
    """Beat: re-queue imports whose worker died or whose task was lost."""
    services.contact_imports_redrive()
