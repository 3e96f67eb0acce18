"""Celery tasks of intake: outreach.tasks.intake_* run on the `intake` queue."""

from celery import shared_task

from config.metrics import imap_poll_observe
from outreach.intake.mailbox import mailbox_poll, mailboxes_due


@shared_task(name="outreach.tasks.intake_poll_mailbox", acks_late=True)
def intake_poll_mailbox(credential_id: str) -> dict:
    """Poll one mailbox. Mailbox errors are recorded on the credential, not raised."""
    credential = mailboxes_due().filter(pk=credential_id).first()
    if credential is None:
        return {"credential_id": credential_id, "skipped": True}
    result = mailbox_poll(credential=credential)
    # A message that could not be read counts the poll as an error too (it is named on
    # the credential: imap_last_error), though the poll went on past it.
    imap_poll_observe(error=result.error or "; ".join(result.unreadable))
    return {
        "credential_id": credential_id,
        "messages": len(result.outcomes),
        "replied": result.count("replied"),
        "kept": result.count("kept"),
        "auto_reply": result.count("auto_reply"),
        "bounced": result.count("bounced"),
        "unreadable": len(result.unreadable),
        "error": result.error,
    }
