"""Mailbox services: create and update SMTP credentials."""

from typing import Any

from django.db import transaction
from django.utils import timezone

from accounts.models import Account
from outreach.mailboxes.pace import next_send_rebased
from outreach.models.mailboxes import SmtpCredential

# --- SMTP credentials ------------------------------------------------------------------


def _settings_set(credential: SmtpCredential, data: dict[str, Any]) -> set[str]:
    """Set the writable settings given; the names set."""
    written = set()
    for name, value in data.items():
        if name in SmtpCredential.WRITABLE_FIELDS:
            setattr(credential, name, value)
            written.add(name)
    return written


def credential_create(*, account: Account, data: dict[str, Any]) -> SmtpCredential:
    credential = SmtpCredential(account=account)
    _settings_set(credential, data)
    credential.save()
    return credential


def credential_update(*, credential: SmtpCredential, data: dict[str, Any]) -> SmtpCredential:
    """Apply a PATCH's settings to the mailbox as it is now: the row is read again under
    its lock, and only the columns the change touches are written. The engine writes the
    rest while the request runs (the send counters, the pace's next time, the daily
    reservations, the IMAP poll's place, the OAuth tokens under their lease), and a
    write of the whole row read before would put their older values back."""
    with transaction.atomic():
        current = SmtpCredential.objects.select_for_update().get(pk=credential.pk)
        pace_before = (current.min_interval_seconds, current.max_interval_seconds)
        written = _settings_set(current, data)
        if (current.min_interval_seconds, current.max_interval_seconds) != pace_before:
            # The time it may send next follows the new pace (docs/sending.md, "Mailbox
            # pace"), from the time the row holds now.
            current.next_send_earliest_at = next_send_rebased(current, timezone.now())
            written.add("next_send_earliest_at")
        if "disabled_at" in data:
            if data["disabled_at"] is None:
                # Re-enable: the reason goes with it.
                current.disabled_at = None
                current.disabled_reason = ""
            elif current.disabled_at is None:
                current.disabled_at = data["disabled_at"]
                current.disabled_reason = SmtpCredential.DisabledReason.MANUAL
            written |= {"disabled_at", "disabled_reason"}
        if "imap_host" in written and current.imap_host == "":
            # Without a host there is no mailbox to poll; forget its state.
            current.imap_uidvalidity = None
            current.imap_last_uid = None
            written |= {"imap_uidvalidity", "imap_last_uid"}
        current.save(update_fields=sorted(written | {"updated_at"}))
    return current
