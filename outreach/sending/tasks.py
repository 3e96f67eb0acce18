"""Celery tasks of sending: mailboxes' claimed batches, each over one SMTP connection.
Names matter: outreach.tasks.send_* run on the `sending` queue (CELERY_TASK_ROUTES)."""

from dataclasses import asdict

from celery import shared_task

from outreach.sending.attempts import BatchResult
from outreach.sending.send import mailboxes_send


@shared_task(name="outreach.tasks.send_mailboxes", acks_late=True, ignore_result=True)
def send_mailboxes(groups: list[list]) -> dict:
    """Send the claimed batches of several mailboxes, `[[credential id, [batch id, ...]],
    ...]`, each mailbox over its own connection, all at once (mailboxes_send). Safe to
    run twice: a claim is marked started before its send, and only unstarted claims of
    the batches are sent. Returns the counts summed over the mailboxes, and how many
    mailboxes failed; with a retry, the words of the earliest and its time."""
    results = mailboxes_send([(credential_id, batch_ids) for credential_id, batch_ids in groups])
    total = {name: 0 for name in ("sent", "bounced", "retried", "failed", "skipped")}
    for result in results:
        for name in total:
            total[name] += getattr(result, name)
    failed_mailboxes = sum(1 for result in results if result.mailbox_error)
    answer: dict[str, int | str] = {
        **total,
        "mailboxes": len(results),
        "mailbox_errors": failed_mailboxes,
    }
    # Celery logs this answer: a retry says why and when (the earliest of the task's).
    retries = [(r.retry_at, r.retry_reason) for r in results if r.retry_at is not None]
    if retries:
        at, reason = min(retries, key=lambda retry: retry[0])
        answer["retry_reason"] = reason
        answer["retry_at"] = at.isoformat().replace("+00:00", "Z")
    return answer


@shared_task(name="outreach.tasks.send_batch", acks_late=True, ignore_result=True)
def send_batch(batch_ids: str | list[str], credential_id: str) -> dict:
    """One mailbox's batches: the task an earlier release queued (send_mailboxes now
    carries them), still run so that none queued across an upgrade is lost."""
    ids = [batch_ids] if isinstance(batch_ids, str) else batch_ids
    results = mailboxes_send([(credential_id, ids)])
    return asdict(results[0]) if results else asdict(BatchResult())
