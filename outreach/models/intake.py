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


# --- intake: delivery reports that named no message of ours -----------------------------


class UnmatchedReport(models.Model):
    """A delivery status report in a mailbox that changed nothing: it names no message
    the service sent, or names one but another recipient (docs/intake.md, "Delivery
    reports"). Kept so the account (and staff) can see it, never applied: anyone can
    write a report."""

    account = models.ForeignKey("accounts.Account", on_delete=models.CASCADE, related_name="+")
    credential = models.ForeignKey(SmtpCredential, on_delete=models.CASCADE, related_name="+")
    # The report's own Message-ID (or "imap-<uid>" without one): read again, kept once.
    report_id = models.CharField(max_length=255)
    sender = models.CharField(max_length=254, blank=True, default="")
    subject = models.CharField(max_length=255, blank=True, default="")
    # Why it changed nothing, the recipients it named, and the first failure's words.
    detail = models.TextField(blank=True, default="")
    recipients = models.TextField(blank=True, default="")
    reason = models.TextField(blank=True, default="")
    bounce_type = models.CharField(max_length=8, blank=True, default="")
    bounce_category = models.CharField(max_length=32, blank=True, default="")
    received_at = models.DateTimeField(db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["credential", "report_id"], name="unmatchedreport_once")
        ]

    def __str__(self) -> str:
        return f"unmatched report {self.report_id} ({self.detail[:40]})"
