"""Delivery status reports in a mailbox: which of our messages failed, for which
recipient, and how (docs/intake.md, "Mailbox polling"). A report is mail like any other,
anyone can write one: it counts only for the recipient of the message it names.

Two forms are read: RFC 3464 reports (a `message/delivery-status` part, whatever the
outer type: Exchange and some gateways send it inside multipart/mixed), and the plain
words of the mail systems that send none (outreach.intake.reports_text). Each failure
is classified (outreach.bounce_types): its `bounce_class`.
"""

import email
import email.policy
import re
from dataclasses import dataclass
from email.message import Message as EmailMessage
from email.utils import getaddresses

from outreach.bounce_types import EXPIRED, SOFT, BounceClass, classify, enhanced_status
from outreach.intake.reports_text import text_report_failures
from outreach.intake.selectors import message_id_normalize, message_ids_in_header

_DAEMON_LOCALPARTS = ("mailer-daemon", "postmaster", "mail-daemon", "mailer")
_BOUNCE_SUBJECT = re.compile(
    r"undeliver|undelivered mail|delivery (?:status notification|failure|failed|has failed)"
    r"|failure notice|mail delivery (?:failed|system|subsystem)|returned mail|nondeliverable"
    r"|non-delivery|could not send message|delivery report|rejected:|not delivered",
    re.IGNORECASE,
)
_MESSAGE_ID_LINE = re.compile(r"^[ \t>]*message-id:[ \t]*(<[^>\s]+>)", re.IGNORECASE | re.MULTILINE)
_TAG = re.compile(r"<[^>]+>")


def _has_status_part(message: EmailMessage) -> bool:
    return any(part.get_content_type() == "message/delivery-status" for part in message.walk())


def is_delivery_report(message: EmailMessage) -> bool:
    """An RFC 3464 report (by its type or its status part), or a mail system notice
    that reads as a bounce: from a mailer daemon or postmaster, or sent by a machine
    with a bounce's Subject."""
    if message.get_content_type() == "multipart/report":
        report_type = message.get_param("report-type") or ""
        assert isinstance(report_type, str)  # a tuple only for an RFC 2231 value
        return report_type.lower() == "delivery-status" or _has_status_part(message)
    if _has_status_part(message):
        return True
    sender = str(message.get("From") or "").lower()
    localpart = sender.split("@")[0].split("<")[-1].strip().strip('"')
    if localpart in _DAEMON_LOCALPARTS:
        return True
    # By its Subject only mail a machine sent (a null return path, or Auto-Submitted),
    # and no reply or forward: a person writing "Re: Undeliverable" is no bounce.
    subject = " ".join(str(message.get("Subject") or "").split())
    automatic = str(message.get("Return-Path") or "").strip() == "<>" or str(
        message.get("Auto-Submitted") or "no"
    ).strip().lower() not in ("", "no")
    return (
        automatic
        and not re.match(r"(?:re|fwd?|aw|wg|sv|tr)\s*:", subject, re.IGNORECASE)
        and bool(_BOUNCE_SUBJECT.search(subject))
    )


def _recipient(value: str | None) -> str:
    """The address of a `Final-Recipient` / `Original-Recipient` field
    (`rfc822; bob@example.org`, RFC 3464 section 2.3), lower-cased."""
    text = " ".join(str(value or "").split())
    if ";" in text:
        text = text.split(";", 1)[1]
    return text.strip().strip("<>").strip().lower()


@dataclass(frozen=True)
class DeliveryFailure:
    """One recipient the report says failed: the addresses it names for it (its
    Final-Recipient and Original-Recipient, lower-cased), its status and diagnostic, and
    whether the failure is final (the report's Action `failed`, or a notice that gave
    up), not a delay."""

    recipients: tuple[str, ...]
    status: str
    reason: str
    final: bool = True

    @property
    def permanent(self) -> bool:
        return self.final

    @property
    def bounce_class(self) -> BounceClass:
        if self.final and self.status.startswith("4"):
            # Retried until the sending server gave up: the address may be fine.
            return BounceClass(SOFT, EXPIRED)
        return classify(code=None, text=self.reason)


@dataclass(frozen=True)
class DeliveryReport:
    original_message_ids: list[str]
    failures: list[DeliveryFailure]  # per failed recipient, in the report's order

    def permanent_failure_of(self, address: str) -> DeliveryFailure | None:
        """The final failure the report gives for `address` (the recipient of the
        message it names), if any: a report about someone else bounces no one."""
        address = address.strip().lower()
        return next((f for f in self.failures if f.permanent and address in f.recipients), None)


def _reason(status: str, diagnostic: str) -> str:
    if diagnostic.lower().startswith(("smtp;", "x-postfix;", "x-unix;", "x-local;")):
        diagnostic = diagnostic.split(";", 1)[1].strip()
    return f"{status} {diagnostic}".strip() if diagnostic else status


def _blocks(part: EmailMessage) -> list[EmailMessage]:
    """The header blocks of a `message/delivery-status` part: the email package splits
    its body into the per-message block, then one per recipient. Some servers write
    the fields into the part's own headers."""
    blocks = [b for b in part.get_payload() or [] if isinstance(b, EmailMessage)]
    return [part, *blocks] if part.get("Final-Recipient") else blocks


def _status(block: EmailMessage) -> tuple[str, str]:
    """The block's enhanced status and the words beside it: "5.0.0 (disk quota)"; a
    bare reply code ("553 Exceeded maximum inbound message size") gives its class."""
    words = " ".join(str(block.get("Status") or "").split())
    diagnostic = " ".join(str(block.get("Diagnostic-Code") or "").split())
    status = enhanced_status(words.split(" ")[0]) or enhanced_status(diagnostic)
    if status is None:
        code = re.match(r"([245])\d\d\b", words) or re.search(r"\b([245])\d\d\b", diagnostic)
        status = f"{code.group(1)}.0.0" if code else ""
    if not diagnostic:
        diagnostic = words.removeprefix(status).strip() if words.startswith(status) else words
    return status, diagnostic


def _status_failures(part: EmailMessage, ids: list[str]) -> tuple[list[DeliveryFailure], bool]:
    """The failures of one `message/delivery-status` part, and whether it named any
    recipient at all (a report of a delivery names one and no failure)."""
    failures, named = [], False
    for block in _blocks(part):
        for name in ("Original-Message-ID", "X-Original-Message-ID"):
            if block.get(name):
                ids.append(message_id_normalize(block.get(name)))
        recipients = tuple(
            r
            for r in (_recipient(block.get(n)) for n in ("Final-Recipient", "Original-Recipient"))
            if r
        )
        named = named or bool(recipients)
        # "failed", "failure", "failed (Bad destination mailbox address)", "error"
        action = (block.get("Action") or "").strip().lower().split(" ")[0]
        status, diagnostic = _status(block)
        if not recipients or not status:
            continue
        if action.startswith(("fail", "error")) or action == "" and status.startswith("5"):
            final = True
        elif action == "delayed" or (action == "" and status.startswith("4")):
            final = False
        else:
            continue  # delivered, relayed, expanded
        failures.append(
            DeliveryFailure(
                recipients=recipients,
                status=status,
                reason=_reason(status, diagnostic),
                final=final,
            )
        )
    return failures, named


def _text_of(message: EmailMessage) -> str:
    """The notice's words: its first text part (tags dropped from HTML), decoded."""
    for part in message.walk():
        if (
            part.get_content_maintype() != "text"
            or part.get_content_type() == "text/rfc822-headers"
        ):
            continue
        raw = part.get_payload(decode=True) or b""
        assert isinstance(raw, bytes)
        charset = part.get_content_charset() or "utf-8"
        try:
            text = raw.decode(charset, errors="replace")
        except LookupError:
            text = raw.decode("utf-8", errors="replace")
        return _TAG.sub(" ", text) if part.get_content_subtype() == "html" else text
    return ""


def _text_failures(message: EmailMessage, ids: list[str]) -> list[DeliveryFailure]:
    text = _text_of(message)
    exclude = {
        a.lower() for _, a in getaddresses([str(message.get(h) or "") for h in ("From", "To")])
    }
    ids += [message_id_normalize(i) for i in _MESSAGE_ID_LINE.findall(text)]
    failures = []
    for failure in text_report_failures(text, exclude=exclude):
        status = enhanced_status(failure.reason)
        if status is None or (failure.final and status.startswith("2")):
            status = "5.0.0" if failure.final else "4.0.0"
        failures.append(
            DeliveryFailure(
                recipients=(failure.recipient,),
                status=status,
                reason=failure.reason,
                final=failure.final,
            )
        )
    return failures


def delivery_report_parse(message: EmailMessage) -> DeliveryReport | None:
    """The referenced Message-IDs and the failed recipients (status, diagnostic and the
    addresses named) of a report; None when it names no failure."""
    ids: list[str] = []
    failures: list[DeliveryFailure] = []
    named = False
    for part in message.walk():
        content_type = part.get_content_type()
        if content_type == "message/delivery-status":
            found, part_named = _status_failures(part, ids)
            failures += found
            named = named or part_named
        elif content_type in ("message/rfc822", "message/global"):
            payload = part.get_payload()
            inner = payload[0] if isinstance(payload, list) and payload else None
            if isinstance(inner, EmailMessage) and inner.get("Message-ID"):
                ids.append(message_id_normalize(inner.get("Message-ID")))
        elif content_type in ("text/rfc822-headers", "message/rfc822-headers"):
            raw = part.get_payload(decode=True) or b""
            assert isinstance(raw, bytes)  # decoded: the bytes of a single part
            headers = email.message_from_bytes(raw, policy=email.policy.compat32)
            if headers.get("Message-ID"):
                ids.append(message_id_normalize(headers.get("Message-ID")))
    if not named:  # no report part, or one without a recipient: the notice's words
        failures = _text_failures(message, ids)
    # Some servers also thread the report to the original message.
    ids += message_ids_in_header(message.get("In-Reply-To"))
    ids += message_ids_in_header(message.get("References"))
    if not failures:
        return None
    return DeliveryReport(original_message_ids=[i for i in ids if i], failures=failures)
