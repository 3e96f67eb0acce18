"""Keeping what a contact sends back: one matched inbound message becomes a Reply
(outreach.conversations), and its label decides what it does to the enrollment
(docs/conversations.md, "Labels"):

- an ordinary reply (no label): recorded as the enrollment's reply
  (outreach.intake.services.enrollment_mark_replied: `enrollment.replied`, the sequence
  stops per the campaign's rules);
- `unsubscribe_request` ("please remove me"): the contact is suppressed as if it had
  unsubscribed (`enrollment.unsubscribed` for each active enrollment), and it is still
  a reply;
- `out_of_office`: not a reply; when the notice gives a return date, the enrollment's
  next step waits until the day after it (00:00 in the zone its send window is read in);
- `auto_reply`: not a reply; kept, nothing else changes.

A message whose sender is not verified (matched by its From alone, with no aligned
DMARC pass: outreach.intake.inbound.Match) is kept and labelled, and none of this
applies: anyone can write a From.

The Reply and its effects are written in one transaction, and a message seen twice (a
poll that crashed before it remembered the UID) finds its Reply and changes nothing
more. The body is never logged.
"""

import logging
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from outreach.campaigns.windows import window_timezone
from outreach.conversations import labels
from outreach.conversations.parse import ParsedMessage, message_parse, text_storable
from outreach.conversations.rules import reply_kept
from outreach.enrollments import enrollment_postpone
from outreach.intake.services import contact_unsubscribe, enrollment_mark_replied
from outreach.models.conversations import Reply
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Enrollment

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Recorded:
    """What keeping one message did: the Reply (None: it was kept before), its label,
    and whether this call recorded the enrollment's reply."""

    reply: Reply | None
    label: str
    replied: bool


def received_at_of(date: datetime | None, *, now: datetime) -> datetime:
    """A message's Date when it is sane (aware, not in the future), else now."""
    if date is None or date.tzinfo is None or date > now:
        return now
    return date


def message_parse_bounded(raw: bytes) -> ParsedMessage:
    return message_parse(raw, max_chars=settings.REPLY_BODY_MAX_CHARS)


def reply_record(
    *,
    credential: SmtpCredential,
    enrollment: Enrollment,
    raw: bytes,
    fallback_id: str,
    sender_verified: bool,
    cut: bool = False,
    parsed: ParsedMessage | None = None,
) -> Recorded:
    """Keep one inbound message matched to `enrollment`, label it, and apply what its
    label means (module docstring). `raw`: the message as read (at most
    IMAP_MAX_MESSAGE_BYTES; `cut` when the mailbox holds more); `fallback_id`: a stable
    stand-in for a missing Message-ID (the mailbox, UIDVALIDITY and UID);
    `sender_verified`: false keeps and labels the message but applies nothing."""
    now = timezone.now()
    parsed = parsed or message_parse_bounded(raw)
    received_at = received_at_of(parsed.date, now=now)
    classification = labels.message_classify(parsed, received_at=received_at)
    label = classification.label
    message_id = text_storable(parsed.message_id or fallback_id)[:255]
    defects = list(parsed.defects)
    if cut:
        defects.append(f"message longer than {settings.IMAP_MAX_MESSAGE_BYTES} bytes: cut")
    with transaction.atomic():
        try:
            with transaction.atomic():
                reply = Reply.objects.create(
                    **_storable(_reply_fields(parsed)),
                    account_id=credential.account_id,
                    enrollment_id=enrollment.pk,
                    campaign_id=enrollment.campaign_id,
                    contact_id=enrollment.contact_id,
                    credential=credential,
                    message_id=message_id,
                    received_at=received_at,
                    truncated=parsed.truncated or cut,
                    label=label,
                    label_source=Reply.LabelSource.AUTO if label else "",
                    returns_on=classification.returns_on,
                    defects=[text_storable(d)[:300] for d in defects[:20]],
                    size=len(raw),
                    sender_verified=sender_verified,
                )
        except IntegrityError:
            return Recorded(reply=None, label=label, replied=False)  # kept before
        replied = sender_verified and _label_apply(
            enrollment, classification, received_at=received_at, now=now, reply_id=reply.pk
        )
        # Its label's on_reply rule (a verified sender's only) and the reply events.
        reply_kept(reply, now=now, act=sender_verified)
    if defects:
        logger.info(
            "mailbox %s: reply %s kept with defects: %s",
            credential.pk,
            reply.pk,
            "; ".join(defects),
        )
    return Recorded(reply=reply, label=label, replied=replied)


def _label_apply(
    enrollment: Enrollment, classification: labels.Classification, *, received_at, now, reply_id
) -> bool:
    """What the label does (module docstring); whether the enrollment's reply was
    recorded by this call."""
    label = classification.label
    if label == labels.OUT_OF_OFFICE:
        if classification.returns_on is not None:
            _postpone(enrollment, classification.returns_on, now=now)
        return False
    if label == labels.AUTO_REPLY:
        return False
    if label == labels.UNSUBSCRIBE_REQUEST:
        contact_unsubscribe(contact_id=enrollment.contact_id, at=received_at)
    replied = enrollment_mark_replied(
        enrollment_id=enrollment.pk, at=received_at, reply_id=reply_id
    )
    return replied is not None


def _reply_fields(parsed: ParsedMessage) -> dict:
    """The columns of a Reply read off the message, within the columns' bounds."""
    return {
        "in_reply_to": parsed.in_reply_to[:255],
        "references": parsed.references[-50:],
        "from_email": parsed.from_email[:254],
        "from_name": parsed.from_name[:255],
        "to": parsed.to[:100],
        "cc": parsed.cc[:100],
        "subject": parsed.subject[:998],
        "text": parsed.text,
        "new_text": parsed.new_text,
        "html": parsed.html,
        "attachments": [
            {"filename": a.filename[:255], "content_type": a.content_type[:255], "size": a.size}
            for a in parsed.attachments[:100]
        ],
    }


def _storable(value):
    """Every text in the columns (text, arrays, the attachments' JSON) as PostgreSQL
    stores it (parse.text_storable)."""
    if isinstance(value, str):
        return text_storable(value)
    if isinstance(value, list):
        return [_storable(item) for item in value]
    if isinstance(value, dict):
        return {key: _storable(item) for key, item in value.items()}
    return value


def _postpone(enrollment: Enrollment, returns_on, *, now: datetime) -> None:
    """The next step waits until 00:00 of the day after the return date, in the zone the
    enrollment's send window is read in."""
    zone_name = window_timezone(
        campaign=enrollment.campaign, contact_timezone=enrollment.contact.timezone
    )
    day_after = returns_on + timedelta(days=1)
    until = datetime.combine(day_after, time(0, 0), tzinfo=ZoneInfo(zone_name))
    enrollment_postpone(enrollment_id=enrollment.pk, until=until, now=now)
