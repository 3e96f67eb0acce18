"""One inbound message of a mailbox: what it is and what it changes (docs/intake.md).

`message_match` reads a message's headers and says what it is: a feedback report (read
whole and applied here: a spam complaint about the recipient of the message it names
unsubscribes that contact, outreach.intake.feedback), a delivery status report (read
whole and applied here: a permanent failure for the recipient of the message it names
bounces that enrollment), our own copy, a mail system notice, unrelated mail, or
a message of a contact we wrote to (a `Match`: found by the thread headers of a
message the service sent, or by its From, which counts as verified only with the
receiving server's aligned DMARC pass, outreach.intake.authentication). `reply_keep`
keeps a matched message as a reply (outreach.intake.replies). Each ends in an
`Outcome` of one of `KINDS`. The IMAP poll around them: outreach.intake.mailbox.
"""

from dataclasses import dataclass
from datetime import timedelta
from email.message import Message as EmailMessage
from email.utils import parseaddr, parsedate_to_datetime

from django.db.models import Min
from django.utils import timezone

from outreach.conversations import labels
from outreach.conversations.parse import message_from_bytes_bounded
from outreach.intake.authentication import dmarc_aligned_pass, mailbox_authserv_id
from outreach.intake.complaints import complaint_apply
from outreach.intake.feedback import feedback_report_parse, is_feedback_report
from outreach.intake.replies import received_at_of, reply_record
from outreach.intake.reports import DeliveryReport, delivery_report_parse, is_delivery_report
from outreach.intake.selectors import (
    enrollment_sent_from,
    message_find,
    message_id_normalize,
    message_ids_in_header,
    message_ids_known,
)
from outreach.models.intake import UnmatchedReport
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Enrollment, Message
from outreach.sending.bounces import enrollment_mark_bounced

REPLIED = "replied"  # a reply, recorded as the enrollment's reply
KEPT = "kept"  # a further reply in a thread whose reply was already recorded
BOUNCED = "bounced"
AUTO_REPLY = "auto_reply"  # an auto-reply or out-of-office notice, kept, not a reply
UNVERIFIED = "unverified"  # matched by its From alone, not authenticated: kept, changes nothing
UNMATCHED = "unmatched"  # also: a delivery report about another recipient than our message's
IGNORED = "ignored"  # our own copies, temporary delivery reports, other reports, repeats
COMPLAINED = "complained"  # a feedback report's spam complaint: the contact unsubscribed
UNSUBSCRIBED = "unsubscribed"  # a feedback report's opt-out
UNREADABLE = "unreadable"  # raised while read (the detail says what); the poll went past it
KINDS = (
    REPLIED,
    KEPT,
    BOUNCED,
    COMPLAINED,
    UNSUBSCRIBED,
    AUTO_REPLY,
    UNVERIFIED,
    UNMATCHED,
    IGNORED,
    UNREADABLE,
)


@dataclass
class Outcome:
    uid: int
    kind: str
    enrollment_id: str | None = None
    detail: str = ""
    failure: str = ""  # what reading it raised (the message is `unreadable`, or kept unparsed)


@dataclass(frozen=True)
class Match:
    """A message matched to an enrollment, and whether its sender is verified: it names
    a message the service sent, or the receiving server's DMARC passed for its From
    domain (docs/intake.md, "Who may change state by mail")."""

    enrollment: Enrollment
    sender_verified: bool


def same_kind(credential: SmtpCredential, sent: Message) -> bool:
    """Whether mail in `credential`'s mailbox may answer `sent`: a simulator's mail
    (docs/sandbox.md) answers only what simulators sent, so nothing posted to one can
    change a real enrollment or a real mailbox's stats; a real mailbox's, only what real
    mailboxes sent (a message whose mailbox was deleted counts as real)."""
    sender = sent.credential
    return credential.is_simulator == (sender is not None and sender.is_simulator)


def _address(value: str | None) -> str:
    return parseaddr(str(value or ""))[1].strip().lower()


def reply_keep(
    *,
    credential: SmtpCredential,
    uid: int,
    match: Match,
    raw: bytes,
    validity,
    cut=False,
    parsed=None,
    fallback_id: str = "",
) -> Outcome:
    """Keep a matched message as a reply (outreach.intake.replies). `fallback_id`: the
    stand-in for a missing Message-ID (by default the mailbox's UIDVALIDITY and UID)."""
    enrollment = match.enrollment
    recorded = reply_record(
        credential=credential,
        enrollment=enrollment,
        raw=raw,
        fallback_id=fallback_id or f"imap-{validity or 0}-{uid}@{credential.pk}",
        cut=cut,
        sender_verified=match.sender_verified,
        parsed=parsed,
    )
    if recorded.reply is None:
        return Outcome(uid, IGNORED, str(enrollment.pk), "message already kept")
    if not match.sender_verified:
        detail = "sender not verified, kept, changes nothing"
        if recorded.label:
            detail += f"; label {recorded.label}"
        return Outcome(uid, UNVERIFIED, str(enrollment.pk), detail)
    if recorded.label in (labels.OUT_OF_OFFICE, labels.AUTO_REPLY):
        return Outcome(uid, AUTO_REPLY, str(enrollment.pk), recorded.label)
    if recorded.replied:
        return Outcome(uid, REPLIED, str(enrollment.pk), recorded.label or "reply")
    return Outcome(uid, KEPT, str(enrollment.pk), "reply already recorded; kept in the thread")


def message_match(
    *, credential: SmtpCredential, uid: int, raw: bytes, fetch_full
) -> Match | Outcome:
    """The enrollment a mailbox message answers (a Match that says whether its sender is
    verified), or the Outcome of a message that is not a reply (a delivery report is
    applied here: it needs `fetch_full()`)."""
    message, _ = message_from_bytes_bounded(raw)
    account_id = credential.account_id

    if is_feedback_report(message):
        return _feedback_read(credential, uid, fetch_full)
    if message.get_content_type() == "multipart/report":
        if not is_delivery_report(message):
            return Outcome(uid, IGNORED, detail="report that is not a delivery status")
        return _report_read(credential, uid, fetch_full)

    sender = _address(message.get("From"))
    if sender == credential.from_email.lower() or message_ids_known(
        account_id=account_id, message_ids=[message.get("Message-ID") or ""]
    ):
        return Outcome(uid, IGNORED, detail="our own message")
    if is_delivery_report(message):  # a notice in words (outreach.intake.reports_text)
        return _report_read(credential, uid, fetch_full)

    referenced = message_ids_in_header(message.get("In-Reply-To")) + message_ids_in_header(
        message.get("References")
    )
    sent = message_find(account_id=account_id, message_ids=referenced)
    if sent is not None and same_kind(credential, sent):
        return Match(sent.enrollment, sender_verified=True)
    # The From fallback: anyone can write a From, so it finds the thread but proves
    # nothing unless the receiving server's DMARC passed for that From's domain.
    enrollment = enrollment_sent_from(credential=credential, email=sender)
    if enrollment is None or not _after_first_send(message, enrollment):
        return Outcome(uid, UNMATCHED, detail=f"from {sender or 'unknown'}")
    authserv_id = mailbox_authserv_id(
        imap_authserv_id=credential.imap_authserv_id, imap_host=credential.imap_host
    )
    verified = dmarc_aligned_pass(message, authserv_id=authserv_id)
    return Match(enrollment, sender_verified=verified)


def _report_read(credential: SmtpCredential, uid: int, fetch_full) -> Outcome:
    """A delivery report read whole and applied; one that changed nothing because it
    names no message of ours (or another recipient) is kept as unmatched."""
    full, _ = message_from_bytes_bounded(fetch_full())
    report = delivery_report_parse(full)
    if report is None and full.get_content_type() != "multipart/report":
        return Outcome(uid, IGNORED, detail="mail system notice that names no failure")
    outcome = _delivery_report_apply(credential, uid, report)
    if outcome.kind == UNMATCHED and report is not None:
        unmatched_report_keep(
            credential=credential, uid=uid, message=full, report=report, outcome=outcome
        )
    return outcome


def _feedback_read(credential: SmtpCredential, uid: int, fetch_full) -> Outcome:
    """A feedback report read whole: a complaint (or an opt-out) about the recipient of
    the message it names unsubscribes that contact (outreach.intake.complaints); a report
    of another type, about a message we did not send, or about someone else (another
    domain than the recipient's) changes nothing."""
    full, _ = message_from_bytes_bounded(fetch_full())
    report = feedback_report_parse(full)
    if not (report.is_complaint or report.is_opt_out):
        kind = report.feedback_type or "none given"
        return Outcome(uid, IGNORED, detail=f"feedback report of type {kind}: not a complaint")
    sent = message_find(account_id=credential.account_id, message_ids=report.original_message_ids)
    if sent is None or not same_kind(credential, sent):
        return Outcome(uid, UNMATCHED, detail="feedback report for an unknown message")
    if not report.names_recipient_of(sent.to_email):
        named = ", ".join(report.recipients)
        detail = f"feedback report names {named}, not the message's recipient: not counted"
        return Outcome(uid, UNMATCHED, str(sent.enrollment_id), detail)
    moved = complaint_apply(
        contact_id=sent.enrollment.contact_id,
        message=sent,
        mailbox_id=credential.pk,
        opt_out=report.is_opt_out,
    )
    if moved < 0:
        return Outcome(uid, IGNORED, str(sent.enrollment_id), "contact already unsubscribed")
    kind = UNSUBSCRIBED if report.is_opt_out else COMPLAINED
    return Outcome(uid, kind, str(sent.enrollment_id), f"feedback report ({report.feedback_type})")


def unmatched_report_keep(
    *,
    credential: SmtpCredential,
    uid: int,
    message: EmailMessage,
    report: DeliveryReport,
    outcome: Outcome,
) -> None:
    """Keep a report that changed nothing (UnmatchedReport), once per report."""
    failure = next((f for f in report.failures if f.permanent), report.failures[0])
    klass = failure.bounce_class
    UnmatchedReport.objects.get_or_create(
        credential=credential,
        report_id=(message_id_normalize(message.get("Message-ID")) or f"imap-{uid}")[:255],
        defaults={
            "account_id": credential.account_id,
            "sender": _address(message.get("From"))[:254],
            "subject": " ".join(str(message.get("Subject") or "").split())[:255],
            "detail": outcome.detail,
            "recipients": ", ".join(r for f in report.failures for r in f.recipients),
            "reason": failure.reason[:1000],
            "bounce_type": klass.type,
            "bounce_category": klass.category,
            "received_at": _received_at(message),
        },
    )


def _delivery_report_apply(
    credential: SmtpCredential, uid: int, report: DeliveryReport | None
) -> Outcome:
    """A permanent failure the report gives for the recipient of the message it names
    bounces that enrollment; a report about anyone else changes nothing."""
    if report is None:
        return Outcome(uid, IGNORED, detail="delivery report, not permanent (no status)")
    permanent = [f for f in report.failures if f.permanent]
    if not permanent:
        status = report.failures[0].status
        return Outcome(uid, IGNORED, detail=f"delivery report, not permanent ({status})")
    sent = message_find(account_id=credential.account_id, message_ids=report.original_message_ids)
    if sent is None or not same_kind(credential, sent):
        return Outcome(uid, UNMATCHED, detail="delivery report for an unknown message")
    failure = report.permanent_failure_of(sent.to_email)
    if failure is None:
        named = ", ".join(r for f in permanent for r in f.recipients) or "no recipient"
        return Outcome(
            uid,
            UNMATCHED,
            str(sent.enrollment_id),
            f"delivery report names {named}, not the message's recipient: not counted",
        )
    changed = enrollment_mark_bounced(
        enrollment=sent.enrollment,
        reason=failure.reason,
        credential=sent.credential,
        bounce_class=failure.bounce_class,
    )
    return Outcome(
        uid,
        BOUNCED if changed else IGNORED,
        str(sent.enrollment_id),
        failure.reason if changed else "already bounced",
    )


def _received_at(message: EmailMessage):
    """The message's Date when it is sane (not in the future), else now."""
    try:
        value = parsedate_to_datetime(str(message.get("Date")))
    except (TypeError, ValueError, IndexError):
        value = None
    return received_at_of(value, now=timezone.now())


def _after_first_send(message: EmailMessage, enrollment) -> bool:
    """The From fallback only counts mail written after our first email reached them."""
    first = Message.objects.filter(enrollment=enrollment).aggregate(first=Min("sent_at"))["first"]
    return first is not None and _received_at(message) >= first - timedelta(minutes=5)
