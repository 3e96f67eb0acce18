"""Delivery status reports (RFC 3464) in a mailbox: which of our messages failed, for
which recipient, and how (docs/intake.md, "Mailbox polling"). A report is mail like any
other, anyone can write one: it counts only for the recipient of the message it names."""

import email
import email.policy
from dataclasses import dataclass
from email.message import Message as EmailMessage

from outreach.intake.selectors import message_id_normalize, message_ids_in_header


def is_delivery_report(message: EmailMessage) -> bool:
    if message.get_content_type() != "multipart/report":
        return False
    report_type = message.get_param("report-type") or ""
    assert isinstance(report_type, str)  # a tuple only for an RFC 2231 value
    return report_type.lower() == "delivery-status"


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
    Final-Recipient and Original-Recipient, lower-cased), its status and diagnostic."""

    recipients: tuple[str, ...]
    status: str
    reason: str

    @property
    def permanent(self) -> bool:
        return self.status.startswith("5")


@dataclass(frozen=True)
class DeliveryReport:
    original_message_ids: list[str]
    failures: list[DeliveryFailure]  # per failed recipient, in the report's order

    def permanent_failure_of(self, address: str) -> DeliveryFailure | None:
        """The permanent failure the report gives for `address` (the recipient of the
        message it names), if any: a report about someone else bounces no one."""
        address = address.strip().lower()
        return next((f for f in self.failures if f.permanent and address in f.recipients), None)


def _reason(status: str, diagnostic: str) -> str:
    if diagnostic.lower().startswith(("smtp;", "x-postfix;", "x-unix;")):
        diagnostic = diagnostic.split(";", 1)[1].strip()
    return f"{status} {diagnostic}".strip() if diagnostic else status


def delivery_report_parse(message: EmailMessage) -> DeliveryReport | None:
    """The referenced Message-IDs and the failed recipients (status, diagnostic and the
    addresses named) of an RFC 3464 report; None when it reports no failure."""
    ids: list[str] = []
    failures: list[DeliveryFailure] = []
    for part in message.walk():
        content_type = part.get_content_type()
        if content_type == "message/delivery-status":
            # The email package splits the status body into header blocks:
            # the per-message block, then one per recipient.
            for block in part.get_payload() or []:
                if not isinstance(block, EmailMessage):
                    continue
                for name in ("Original-Message-ID", "X-Original-Message-ID"):
                    if block.get(name):
                        ids.append(message_id_normalize(block.get(name)))
                action = (block.get("Action") or "").strip().lower()
                block_status = (block.get("Status") or "").split()
                if block_status and action in ("", "failed"):
                    recipients = (
                        _recipient(block.get(name))
                        for name in ("Final-Recipient", "Original-Recipient")
                    )
                    diagnostic = " ".join(str(block.get("Diagnostic-Code") or "").split())
                    failures.append(
                        DeliveryFailure(
                            recipients=tuple(r for r in recipients if r),
                            status=block_status[0].strip(),
                            reason=_reason(block_status[0].strip(), diagnostic),
                        )
                    )
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
    # Some servers also thread the report to the original message.
    ids += message_ids_in_header(message.get("In-Reply-To"))
    ids += message_ids_in_header(message.get("References"))
    if not failures:
        return None
    return DeliveryReport(original_message_ids=[i for i in ids if i], failures=failures)
