"""Intake models: the relay webhook tokens already applied."""

from django.db import models

from outreach.models.mailboxes import SmtpCredential

# --- intake: relay-provider webhook replay guard ----------------------------------------


class RelayWebhookToken(models.Model):
    """A Mailgun webhook `signature.token` already accepted, so a captured request
    cannot be replayed. Only needed while its timestamp is inside the 5-minute
    window; the intake beat task deletes older rows."""

    token = models.CharField(max_length=255, unique=True)
    credential = models.ForeignKey(SmtpCredential, on_delete=models.CASCADE, related_name="+")
    received_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return f"relay token {self.token[:8]}..."
