"""Beat tasks of intake: one poll task per due mailbox; the simulators' outcomes sweep."""

from celery import shared_task

from outreach.intake.mailbox import mailboxes_due
from outreach.intake.relay import relay_tokens_prune
from outreach.intake.simulator import simulator_outcomes_due
from outreach.intake.tasks import intake_poll_mailbox, simulator_outcome


@shared_task(name="outreach.tasks.intake_poll_mailboxes")
def intake_poll_mailboxes() -> int:
    """Beat: one poll task per enabled mailbox with IMAP settings, so a slow or
    unreachable mailbox delays nobody else; also forgets stale relay tokens."""
    relay_tokens_prune()
    ids = [str(pk) for pk in mailboxes_due().values_list("pk", flat=True)]
    for credential_id in ids:
        intake_poll_mailbox.delay(credential_id)
    return len(ids)


@shared_task(name="outreach.tasks.intake_simulator_sweep")
def intake_simulator_sweep() -> int:
    """Beat, every SIMULATOR_DELAY_SECONDS: the outcome task again for each simulator
    message whose outcome was not made by then (outreach.intake.simulator)."""
    due = simulator_outcomes_due()
    for message_pk in due:
        simulator_outcome.delay(message_pk)
    return len(due)
