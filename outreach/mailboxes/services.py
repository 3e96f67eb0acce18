"""Mailbox services: create and update SMTP credentials."""

from typing import Any

from django.utils import timezone

from accounts.models import Account
from outreach.mailboxes.pace import next_send_rebased
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


def credential_update(*, credential: SmtpCredential, data: dict[str, Any]) -> SmtpCredential:
    pace_before = (credential.min_interval_seconds, credential.max_interval_seconds)
    _settings_set(credential, data)
    if (credential.min_interval_seconds, credential.max_interval_seconds) != pace_before:
        # The time it may send next follows the new pace (docs/sending.md, "Mailbox pace").
        credential.next_send_earliest_at = next_send_rebased(credential, timezone.now())
    if "disabled_at" in data:
        if data["disabled_at"] is None:
            # Re-enable: the reason goes with it.
            credential.disabled_at = None
            credential.disabled_reason = ""
        elif credential.disabled_at is None:
            credential.disabled_at = data["disabled_at"]
            credential.disabled_reason = SmtpCredential.DisabledReason.MANUAL
    if credential.imap_host == "":
        # Without a host there is no mailbox to poll; forget its state.
        credential.imap_uidvalidity = None
        credential.imap_last_uid = None
    # Every column but the OAuth tokens: a refresh may have replaced them since this
    # row was read (outreach.mailboxes.oauth writes them, under its lease).
    credential.save(
        update_fields=[
            f.name
            for f in SmtpCredential._meta.concrete_fields
            if not f.primary_key and f.name not in SmtpCredential.OAUTH_TOKEN_FIELDS
        ]
    )
    return credential
