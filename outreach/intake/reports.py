"""Delivery status reports (RFC 3464) in a mailbox: which of our messages failed, and
how (docs/intake.md, "Mailbox polling")."""

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


@dataclass(frozen=True)
class DeliveryFailure:
    original_message_ids: list[str]
    status: str
    reason: str

    @property
    def permanent(self) -> bool:
        return self.status.startswith("5")


def delivery_report_parse(message: EmailMessage) -> DeliveryFailure | None:
    """The referenced Message-IDs, the first failed recipient's status and diagnostic
    of an RFC 3464 report; None when it reports no failure."""
    ids: list[str] = []
    status = ""
    diagnostic = ""
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
                block_status = block.get("Status")
                if block_status and not status and action in ("", "failed"):
                    status = block_status.split()[0].strip()
                    diagnostic = " ".join(str(block.get("Diagnostic-Code") or "").split())
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
    if not status:
        return None
    if diagnostic.lower().startswith(("smtp;", "x-postfix;", "x-unix;")):
        diagnostic = diagnostic.split(";", 1)[1].strip()
    return DeliveryFailure(
        original_message_ids=[i for i in ids if i],
        status=status,
        reason=f"{status} {diagnostic}".strip() if diagnostic else status,
    )
