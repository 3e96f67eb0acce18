"""Mailbox services: create and update SMTP credentials."""

from typing import Any

from django.utils import timezone

from accounts.models import Account
from config.api.errors import ValidationFailed
from config.db.rows import row_change
from outreach.errors import CredentialNotFound
from outreach.mailboxes.pace import next_send_rebased, pace_errors
from outreach.models.mailboxes import SmtpCredential

# --- SMTP credentials ------------------------------------------------------------------


def _settings_set(credential: SmtpCredential, data: dict[str, Any]) -> None:
    for name, value in data.items():
        if name in SmtpCredential.WRITABLE_FIELDS:
            setattr(credential, name, value)


def credential_create(*, account: Account, data: dict[str, Any]) -> SmtpCredential:
    credential = SmtpCredential(account=account)
    _settings_set(credential, data)
    credential.save()
    return credential


def simulator_create(*, account: Account, data: dict[str, Any]) -> SmtpCredential:
    """A simulator mailbox (docs/sandbox.md): no server, no login, never polled."""
    credential = SmtpCredential(
        account=account, auth_method=SmtpCredential.AuthMethod.SIMULATOR, smtp_host=""
    )
    _settings_set(credential, data)
    credential.save()
    return credential


def credential_update(*, credential: SmtpCredential, data: dict[str, Any]) -> SmtpCredential:
    """Apply a PATCH's settings to the mailbox as it is now (config.db.rows.row_change):
    the engine writes the rest of the row while the request runs (the send counters, the
    pace's next time, the day's reservations, the IMAP poll's place, the OAuth tokens
    under their lease), and only the columns the change moves are written."""

    def change(current: SmtpCredential) -> None:
        # The request was checked against the row it read: a pace changed since (another
        # request's) is checked again here, a 422 rather than the constraint's error.
        errors = pace_errors(data, current)
        if errors:
            raise ValidationFailed(errors)
        pace_before = (current.min_interval_seconds, current.max_interval_seconds)
        ramp_before = current.ramp_up
        _settings_set(current, data)
        if current.ramp_up != ramp_before:
            # A new ramp counts its days from its own first send (docs/deliverability.md).
            current.ramp_started_on = None
        if "paused_at" in data:  # only null passes the serializer: resume
            current.paused_at = None
            current.paused_reason = ""
        if (current.min_interval_seconds, current.max_interval_seconds) != pace_before:
            # The time it may send next follows the new pace (docs/sending.md, "Mailbox
            # pace"), from the time the row holds now.
            current.next_send_earliest_at = next_send_rebased(current, timezone.now())
        if "disabled_at" in data:
            if data["disabled_at"] is None:
                # Re-enable: the reason goes with it.
                current.disabled_at = None
                current.disabled_reason = ""
            elif current.disabled_at is None:
                current.disabled_at = data["disabled_at"]
                current.disabled_reason = SmtpCredential.DisabledReason.MANUAL
        if current.imap_host == "":
            # Without a host there is no mailbox to poll; forget its state.
            current.imap_uidvalidity = None
            current.imap_last_uid = None

    return row_change(credential, change, missing=CredentialNotFound)
