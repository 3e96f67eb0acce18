"""Beat task of intake: one poll task per due mailbox."""

from celery import shared_task

from outreach.intake.mailbox import mailboxes_due
from outreach.intake.relay import relay_tokens_prune
from outreach.intake.tasks import intake_poll_mailbox


@shared_task(name="outreach.tasks.intake_poll_mailboxes")
def intake_poll_mailboxes() -> int:
    """Beat: one poll task per enabled mailbox with IMAP settings, so a slow or
    unreachable mailbox delays nobody else; also forgets stale relay tokens."""
    relay_tokens_prune()
    ids = [str(pk) for pk in mailboxes_due().values_list("pk", flat=True)]
    for credential_id in ids:
        intake_poll_mailbox.delay(credential_id)
    return len(ids)
