"""manage.py mailbox_poll <credential_id>

Polls one credential's IMAP mailbox now, with the same rules as the beat task, and
prints what each new message was matched to. Exits non-zero when the mailbox
cannot be reached (the error is also recorded on the credential).
"""

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from config.api.ids import is_uuid
from outreach.intake.inbound import KINDS
from outreach.intake.mailbox import mailbox_poll
from outreach.models.mailboxes import SmtpCredential


class Command(BaseCommand):
    help = "Poll one SMTP credential's IMAP mailbox for replies and bounce reports, now."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("credential_id", help="SMTP credential id.")

    def handle(self, *args: Any, credential_id: str, **options: Any) -> None:
        credential = (
            SmtpCredential.objects.filter(pk=credential_id).first()
            if is_uuid(credential_id)
            else None
        )
        if credential is None:
            raise CommandError(f"No SMTP credential {credential_id}.")
        if not credential.imap_host:
            raise CommandError(f"Credential {credential_id} has no IMAP settings.")
        if credential.disabled_at is not None:
            self.stdout.write("Note: the credential is disabled; the beat task skips it.")

        result = mailbox_poll(credential=credential)
        if result.error:
            raise CommandError(f"Mailbox {credential.imap_host} unreachable: {result.error}")
        for outcome in result.outcomes:
            enrollment = f" enrollment {outcome.enrollment_id}" if outcome.enrollment_id else ""
            detail = f" ({outcome.detail})" if outcome.detail else ""
            self.stdout.write(f"uid {outcome.uid}: {outcome.kind}{enrollment}{detail}")
        summary = ", ".join(f"{result.count(kind)} {kind}" for kind in KINDS)
        self.stdout.write(f"{len(result.outcomes)} new message(s): {summary}.")
        if result.more:
            self.stdout.write("More messages are waiting: run again or let the beat task continue.")
