"""Feedback reports in a mailbox (ARF, RFC 5965): a mailbox provider's word that one of
its users marked our message as spam (docs/intake.md, "Feedback reports").

A provider's feedback loop (Yahoo's, Microsoft's JMRP, Return Path's, AOL's...) sends a
`multipart/report; report-type=feedback-report` to the address the sender registered:
a human-readable part, a `message/feedback-report` part (`Feedback-Type`, `User-Agent`,
`Original-Mail-From`, `Original-Rcpt-To`...), and the original message whole
(`message/rfc822`) or its headers (`text/rfc822-headers`). Microsoft's loop (JMRP)
sends no report part: a `multipart/mixed` from `staff@hotmail.com`, Subject "complaint
about message from <ip>", with the original whole, its recipient in the original's
`X-HmXmrOriginalRecipient` header; it is read as an `abuse` report. What we read:

- the type, lower-cased: `abuse` and `fraud` are complaints; `opt-out` and
  `opt-out-list` (the early drafts' types, still sent by some loops) ask for removal;
  `auth-failure` (RFC 6591, DMARC's failure reports), `not-spam`, `virus`, `other` and
  any unknown type change nothing;
- the original's Message-ID (of the attached message or headers), then the report's
  own `In-Reply-To`/`References`;
- the `Original-Rcpt-To` addresses, lower-cased (often left out or redacted by the
  loop: `redacted@yahoo.com`).

Like a delivery report, anyone can write one: what it changes is decided where it is
applied (outreach.intake.inbound), for the recipient of the message it names only.
"""

import email
import email.policy
from dataclasses import dataclass
from email.message import Message as EmailMessage
from email.utils import getaddresses

from outreach.intake.selectors import message_id_normalize, message_ids_in_header

COMPLAINT_TYPES = frozenset({"abuse", "fraud"})
OPT_OUT_TYPES = frozenset({"opt-out", "opt-out-list"})


@dataclass(frozen=True)
class FeedbackReport:
    feedback_type: str  # lower-cased; "" when the report gives none
    original_message_ids: list[str]
    recipients: tuple[str, ...]  # Original-Rcpt-To, lower-cased

    @property
    def is_complaint(self) -> bool:
        return self.feedback_type in COMPLAINT_TYPES

    @property
    def is_opt_out(self) -> bool:
        return self.feedback_type in OPT_OUT_TYPES

    def names_recipient_of(self, address: str) -> bool:
        """Whether the report may be about `address`: it names no recipient, names it, or
        names an address of its domain (a loop that redacts the local part keeps the
        domain; as DMARC does, the domain is what it vouches for)."""
        address = address.strip().lower()
        if not self.recipients or address in self.recipients:
            return True
        domain = address.rpartition("@")[2]
        return any(r.rpartition("@")[2] == domain for r in self.recipients)


# Microsoft's feedback loop (JMRP): its sender, and the header it adds to the original.
JMRP_SENDER = "staff@hotmail.com"
JMRP_RECIPIENT = "X-HmXmrOriginalRecipient"


def is_feedback_report(message: EmailMessage) -> bool:
    """A report whose type says feedback, or Microsoft's complaint (module docstring):
    its headers are enough to tell."""
    if message.get_content_type() == "multipart/report":
        report_type = message.get_param("report-type") or ""
        return isinstance(report_type, str) and report_type.strip().lower() == "feedback-report"
    senders = [a.lower() for _, a in getaddresses([str(message.get("From") or "")])]
    subject = " ".join(str(message.get("Subject") or "").split()).lower()
    return (
        message.get_content_maintype() == "multipart"
        and senders == [JMRP_SENDER]
        and subject.startswith("complaint about message from")
    )


def _fields(part: EmailMessage) -> EmailMessage | None:
    """The fields of a `message/feedback-report` part: the email package reads its body
    as one block of headers (or, for some writers, the part's own headers hold them)."""
    if part.get("Feedback-Type"):
        return part
    payload = part.get_payload()
    if isinstance(payload, list):
        return next((p for p in payload if isinstance(p, EmailMessage)), None)
    if isinstance(payload, str) and payload.strip():
        return email.message_from_string(payload.lstrip(), policy=email.policy.compat32)
    return None


def _original_id(part: EmailMessage) -> str:
    """The Message-ID of the attached original (whole, or its headers only)."""
    if part.get_content_type() in ("message/rfc822", "message/global"):
        payload = part.get_payload()
        inner = payload[0] if isinstance(payload, list) and payload else None
        return str(inner.get("Message-ID") or "") if isinstance(inner, EmailMessage) else ""
    raw = part.get_payload(decode=True) or b""
    assert isinstance(raw, bytes)  # decoded: the bytes of a single part
    headers = email.message_from_bytes(raw.lstrip(), policy=email.policy.compat32)
    return str(headers.get("Message-ID") or "")


def _jmrp_recipient(part: EmailMessage) -> str:
    """The original recipient Microsoft's loop wrote into the attached original."""
    payload = part.get_payload()
    inner = payload[0] if isinstance(payload, list) and payload else None
    if not isinstance(inner, EmailMessage):
        return ""
    # An empty value gives no pair on Python 3.11 ([("", "")] on 3.13).
    found = getaddresses([str(inner.get(JMRP_RECIPIENT) or "")])
    address = found[0][1] if found else ""
    return address.strip().lower() if "@" in address else ""


def feedback_report_parse(message: EmailMessage) -> FeedbackReport:
    """The type, the Message-IDs of the original and the recipients of a feedback
    report (module docstring); empty fields for what it leaves out."""
    feedback_type, ids, recipients, jmrp_recipients = "", [], [], []
    for part in message.walk():
        content_type = part.get_content_type()
        if content_type == "message/feedback-report" and not feedback_type:
            fields = _fields(part)
            if fields is None:
                continue
            feedback_type = " ".join(str(fields.get("Feedback-Type") or "").split()).lower()
            for _, address in getaddresses(
                [str(v) for v in fields.get_all("Original-Rcpt-To", [])]
            ):
                if "@" in address:
                    recipients.append(address.strip().lower())
        elif content_type in (
            "message/rfc822",
            "message/global",
            "text/rfc822-headers",
            "text/rfc822-header",  # sic, seen in the wild
            "message/rfc822-headers",
        ):
            if original := message_id_normalize(_original_id(part)):
                ids.append(original)
            if jmrp := _jmrp_recipient(part):
                jmrp_recipients.append(jmrp)
    if not feedback_type and jmrp_recipients:  # Microsoft's: a complaint, by its form
        feedback_type, recipients = "abuse", jmrp_recipients
    ids += message_ids_in_header(message.get("In-Reply-To"))
    ids += message_ids_in_header(message.get("References"))
    return FeedbackReport(
        feedback_type=feedback_type,
        original_message_ids=list(dict.fromkeys(i for i in ids if i)),
        recipients=tuple(dict.fromkeys(recipients)),
    )
