"""Per-account suppression list: addresses that unsubscribed, complained or bounced.

The contact row carries the suppression the API shows (unsubscribed_at, bounced_at),
but a contact can be deleted; the Suppression rows cannot (by the API), so an
unsubscribe is honoured forever. Every service that suppresses a contact records the
address here in its own transaction (`suppression_record`), and every path that
creates a contact, or gives one a new address, copies the address's suppression onto
it (`suppressions_for` / `contact_suppression_apply`) before it is written, so a
re-created contact is never enrolled, dispatched or sent to.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from outreach.models.contacts import Contact, Suppression

# Reasons that suppress as an unsubscribe (Contact.unsubscribed_at).
_UNSUBSCRIBE_REASONS = (Suppression.Reason.UNSUBSCRIBED, Suppression.Reason.COMPLAINED)


@dataclass(frozen=True)
class Suppressed:
    unsubscribed_at: datetime | None = None
    bounced_at: datetime | None = None


def suppression_record(*, account_id: UUID, email: str, reason: str, at: datetime) -> None:
    """Remember that `email` is suppressed for `reason`. One INSERT ... ON CONFLICT DO
    NOTHING: recording an address twice keeps the first time."""
    Suppression.objects.bulk_create(
        [Suppression(account_id=account_id, email_lower=email.lower(), reason=reason, at=at)],
        ignore_conflicts=True,
    )


def suppressions_for(*, account_id: UUID, keys: Iterable[str]) -> dict[str, Suppressed]:
    """The suppression of each lower-cased address in `keys` that has one (one query)."""
    keys = list(keys)
    if not keys:
        return {}
    found: dict[str, dict[str, datetime]] = {}
    rows = Suppression.objects.filter(account_id=account_id, email_lower__in=keys).values_list(
        "email_lower", "reason", "at"
    )
    for key, reason, at in rows:
        entry = found.setdefault(key, {})
        name = "unsubscribed_at" if reason in _UNSUBSCRIBE_REASONS else "bounced_at"
        if entry.get(name) is None or at < entry[name]:
            entry[name] = at
    return {key: Suppressed(**entry) for key, entry in found.items()}


def contact_suppression_apply(contact: Contact, suppressed: Suppressed | None) -> None:
    """Copy an address's suppression onto an unsaved contact (an earlier time wins)."""
    if suppressed is None:
        return
    for name in ("unsubscribed_at", "bounced_at"):
        at = getattr(suppressed, name)
        current = getattr(contact, name)
        if at is not None and (current is None or at < current):
            setattr(contact, name, at)
