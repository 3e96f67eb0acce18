"""Celery task of sending: a mailbox's claimed batches over one SMTP connection. Names
matter: outreach.tasks.send_* run on the `sending` queue (CELERY_TASK_ROUTES)."""

from celery import shared_task

from outreach.sending.batch import batch_send


@shared_task(name="outreach.tasks.send_batch", acks_late=True, ignore_result=True)
def send_batch(batch_ids: str | list[str], credential_id: str) -> dict:
    """Send a mailbox's claimed batches (one id, or the ids of one scheduler run) over
    one SMTP connection. Safe to run twice: a claim is marked started before its send,
    and only unstarted claims of the batches are sent."""
    ids = [batch_ids] if isinstance(batch_ids, str) else batch_ids
    result = batch_send(batch_ids=ids, credential_id=credential_id)
    return result.__dict__
