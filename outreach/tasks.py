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


# --- intake: mailbox polling (outreach.tasks.intake_* run on the `intake` queue) ---


@shared_task(name="outreach.tasks.intake_poll_mailboxes")
def intake_poll_mailboxes() -> int:
    """Beat: one poll task per enabled mailbox with IMAP settings, so a slow or
    unreachable mailbox delays nobody else; also forgets stale relay tokens."""
    from outreach.intake.mailbox import mailboxes_due
    from outreach.intake.relay import relay_tokens_prune

    relay_tokens_prune()
    ids = [str(pk) for pk in mailboxes_due().values_list("pk", flat=True)]
    for credential_id in ids:
        intake_poll_mailbox.delay(credential_id)
    return len(ids)


@shared_task(name="outreach.tasks.intake_poll_mailbox", acks_late=True)
def intake_poll_mailbox(credential_id: str) -> dict:
    """Poll one mailbox. Mailbox errors are recorded on the credential, not raised."""
    from outreach.intake.mailbox import mailbox_poll, mailboxes_due

    credential = mailboxes_due().filter(pk=credential_id).first()
    if credential is None:
        return {"credential_id": credential_id, "skipped": True}
    result = mailbox_poll(credential=credential)
    return {
        "credential_id": credential_id,
        "messages": len(result.outcomes),
        "replied": result.count("replied"),
        "bounced": result.count("bounced"),
        "error": result.error,
    }


# --- end intake ---


@shared_task(name="outreach.tasks.schedule_sends", ignore_result=True)
def schedule_sends() -> int:
    """Beat (every SENDING_SCHEDULE_INTERVAL_SECONDS): claim due enrollments and queue a
    send_batch per mailbox. Returns the number of batches queued."""
    from outreach.scheduler import schedule_due

    return len(schedule_due(enqueue=True))


@shared_task(name="outreach.tasks.send_batch", acks_late=True, ignore_result=True)
def send_batch(batch_ids: str | list[str], credential_id: str) -> dict:
    """Send a mailbox's claimed batches (one id, or the ids of one scheduler run) over
    one SMTP connection. Safe to run twice: a claim is marked started before its send,
    and only unstarted claims of the batches are sent."""
    from outreach.sending import batch_send

    ids = [batch_ids] if isinstance(batch_ids, str) else batch_ids
    result = batch_send(batch_ids=ids, credential_id=credential_id)
    return result.__dict__
