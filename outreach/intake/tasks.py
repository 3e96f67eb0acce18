"""Celery tasks of intake: outreach.tasks.intake_* and outreach.simulator_* run on the
`intake` queue."""

import base64

from celery import shared_task

from config.api.ids import is_uuid
from config.metrics import imap_poll_observe
from outreach.intake.mailbox import mailbox_poll, mailboxes_due
from outreach.intake.replay import inbound_message_take
from outreach.intake.simulator import simulator_outcome_make


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


@shared_task(name="outreach.simulator_outcome", acks_late=True)
def simulator_outcome(message_pk: str) -> str:
    """The outcome a simulator's accepted message asks for by its recipient (open, click,
    reply, ...: outreach.intake.simulator), queued by the send once its record is
    committed. Safe to run twice: every service it feeds is idempotent. A worker that
    dies with it: acknowledged only after it ran, so the broker hands it out again, and
    the sweep (intake_simulator_sweep) makes what is still missing."""
    if not is_uuid(message_pk):
        return "not a message id"
    return simulator_outcome_make(message_id=message_pk)


@shared_task(name="outreach.tasks.intake_inbound_message", acks_late=True)
def intake_inbound_message(credential_id: str, raw: str) -> str:
    """A message posted to a simulator mailbox (POST /smtp_credentials/:id/inbound),
    `raw` its bytes in base64, taken by the intake as a poll takes one. Safe to run
    twice: the same message is kept once."""
    return inbound_message_take(credential_id=credential_id, raw=base64.b64decode(raw))
