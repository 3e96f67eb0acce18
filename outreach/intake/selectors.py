"""Reads for intake: finding the message, enrollment or contact a signal is about."""

import re
from collections.abc import Iterable
from dataclasses import dataclass
from uuid import UUID

from outreach.conversations.parse import text_storable
from outreach.models.contacts import Contact
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Enrollment, Message
from outreach.models.tombstones import DeletedEnrollment
from outreach.sending.tokens import Named

_ANGLE_ID = re.compile(r"<([^<>\s]+)>")


def _header_text(value: object) -> str:
    """A header value as text: the email package hands a Header object, not a str, for
    a value with raw 8-bit bytes (its str() shows them as U+FFFD); never a NUL."""
    if value is None:
        return ""
    return text_storable(value if isinstance(value, str) else str(value))


def message_id_normalize(value: object) -> str:
    """A Message-ID as stored: no surrounding whitespace or angle brackets."""
    value = _header_text(value).strip()
    if value.startswith("<") and value.endswith(">"):
        value = value[1:-1].strip()
    return value


def message_ids_in_header(value: object) -> list[str]:
    """Every `<id>` of an In-Reply-To / References header, in order; a bare id
    (some providers drop the brackets) counts as one."""
    value = _header_text(value)
    if not value:
        return []
    found = _ANGLE_ID.findall(value)
    if not found and value.strip() and " " not in value.strip():
        found = [message_id_normalize(value)]
    return found


def _lookup_keys(ids: Iterable[object]) -> list[str]:
    # Message-IDs are compared as sent, and lower-cased: some relays and mail clients
    # change the case of the domain part. Both keys use the unique index.
    keys: list[str] = []
    for raw in ids:
        normalized = message_id_normalize(raw)
        for key in (normalized, normalized.lower()):
            if key and key not in keys:
                keys.append(key)
    return keys


def message_find(*, account_id: UUID, message_ids: Iterable[str]) -> Message | None:
    """The account's stored message named first in `message_ids` (In-Reply-To
    before References), with its enrollment, campaign and contact; None if none matches."""
    ordered = list(message_ids)
    keys = _lookup_keys(ordered)
    if not keys:
        return None
    found = {
        m.message_id: m
        for m in Message.objects.filter(account_id=account_id, message_id__in=keys).select_related(
            "enrollment__campaign", "enrollment__contact", "credential"
        )
    }
    for key in keys:
        if key in found:
            return found[key]
    return None


def enrollment_sent_from(*, credential: SmtpCredential, email: str) -> Enrollment | None:
    """The most recently sent enrollment of this mailbox whose contact is `email`:
    the reply fallback when a message names none of our Message-IDs."""
    email = (email or "").strip().lower()
    if not email:
        return None
    return (
        Enrollment.objects.filter(
            credential=credential,
            contact__account_id=credential.account_id,
            contact__email_lower=email,
            sent_at__isnull=False,
        )
        .select_related("campaign", "contact")
        .order_by("-sent_at")
        .first()
    )


def message_ids_known(*, account_id: UUID, message_ids: Iterable[object]) -> bool:
    """Whether any of these ids is a message we sent (our own copies are not replies)."""
    keys = _lookup_keys(message_ids)
    return (
        bool(keys) and Message.objects.filter(account_id=account_id, message_id__in=keys).exists()
    )


@dataclass(frozen=True)
class UnsubscribeTarget:
    contact: Contact
    sender: str  # whom the page names: the mailbox's name or address, else the account's name


def unsubscribe_target(named: Named) -> UnsubscribeTarget | None:
    """Whom an unsubscribe link unsubscribes: its enrollment's contact; when the
    enrollment was deleted (with its campaign), the contact its tombstone or the link
    itself names. None once the contact is gone."""
    # The enrollment, else its tombstone: either knows the contact and its mailbox.
    for model in (Enrollment, DeletedEnrollment):
        row = (
            model.objects.select_related("contact__account", "credential")
            .filter(pk=named.enrollment_id)
            .first()
        )
        if row is not None:
            credential = row.credential
            sender = (credential.from_name or credential.from_email) if credential else ""
            return UnsubscribeTarget(row.contact, sender or row.contact.account.name)
    if named.contact_id is None:
        return None
    contact = Contact.objects.select_related("account").filter(pk=named.contact_id).first()
    return UnsubscribeTarget(contact, contact.account.name) if contact is not None else None
