"""The complaint guard (API.md 20; docs/deliverability.md, "The complaint guard").

    complaint_record(credential_id=..., at=now)

When a spam complaint about a message of a mailbox arrives (a relay provider's complaint
event: outreach.intake.relay), in one transaction:
1. the complaint is kept (MailboxComplaint);
2. the mailbox's complaint rate is its complaints of the last COMPLAINT_WINDOW over its
   sends of the same days (Message rows), once it has COMPLAINT_MIN_SENDS sends there;
3. above COMPLAINT_RATE_PAUSE_PERCENT (strictly, as the bounce threshold), the mailbox is
   paused (`paused_at`, `paused_reason: complaint_rate`) by a conditional UPDATE, so a
   second complaint meanwhile pauses it once; it stays enabled (no `credential.disabled`),
   gets no claim (outreach.sending.scheduler) and `credential.throttled` (opt-in) is
   emitted with `provider` and `until` null. PATCH {paused_at: null} resumes it
   (`mailbox_resume`).
"""

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction

from outreach.events import credential_throttled_emit
from outreach.models.mailboxes import SmtpCredential
from outreach.models.reputation import MailboxComplaint
from outreach.models.sending import Message

logger = logging.getLogger(__name__)

COMPLAINT_WINDOW = timedelta(days=30)
# A rate over fewer sends says little (Gmail's own Postmaster rates need volume too).
COMPLAINT_MIN_SENDS = 100
COMPLAINT_RATE = SmtpCredential.PausedReason.COMPLAINT_RATE.value


def complaint_rate(credential_id, *, at: datetime) -> tuple[int, int]:
    """The mailbox's (complaints, sends) of the COMPLAINT_WINDOW before `at`."""
    since = at - COMPLAINT_WINDOW
    complaints = MailboxComplaint.objects.filter(credential_id=credential_id, at__gt=since)
    sends = Message.objects.filter(credential_id=credential_id, sent_at__gt=since)
    return complaints.count(), sends.count()


def complaint_record(*, credential_id, at: datetime) -> bool:
    """Steps 1 to 3 of the module docstring; whether this complaint paused the mailbox."""
    with transaction.atomic():
        MailboxComplaint.objects.create(credential_id=credential_id, at=at)
        complaints, sends = complaint_rate(credential_id, at=at)
        if sends < COMPLAINT_MIN_SENDS:
            return False
        rate = complaints * 100 / sends
        threshold = settings.COMPLAINT_RATE_PAUSE_PERCENT
        if rate <= threshold:
            return False
        paused = SmtpCredential.objects.filter(pk=credential_id, paused_at__isnull=True).update(
            paused_at=at, paused_reason=COMPLAINT_RATE, updated_at=at
        )
        if not paused:
            return False
        credential = SmtpCredential.objects.get(pk=credential_id)
        detail = (
            f"{complaints} spam complaints over {sends} sends in the last 30 days "
            f"({rate:.2f}%, above {threshold:g}%)."
        )
        logger.warning("mailbox %s paused: %s", credential_id, detail)
        credential_throttled_emit(
            credential=credential, provider=None, reason=COMPLAINT_RATE, until=None, detail=detail
        )
        return True


def mailbox_resume(credential: SmtpCredential) -> None:
    """PATCH {paused_at: null}: the mailbox sends again."""
    SmtpCredential.objects.filter(pk=credential.pk).update(paused_at=None, paused_reason="")
    credential.paused_at, credential.paused_reason = None, ""
