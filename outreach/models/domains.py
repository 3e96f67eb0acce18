"""The stored check of each mailbox's From domain (outreach.domains.sender)."""

from django.db import models


class SenderDomainCheck(models.Model):
    """The last check of a mailbox's From domain: findings and records, with its time.
    One row per mailbox, made by its first check (beat, or POST .../domain_check)."""

    class Status(models.TextChoices):
        PASS = "pass"  # noqa: S105 - a status, not a secret
        WARNING = "warning"
        ERROR = "error"

    credential = models.OneToOneField(
        "outreach.SmtpCredential",
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="domain_check",
    )
    domain = models.CharField(max_length=255)
    # Selectors the account named (POST .../domain_check), looked up besides the usual ones.
    dkim_selectors = models.JSONField(default=list, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices)
    # [{code, level, message}] (outreach.domains.sender.Finding)
    findings = models.JSONField(default=list, blank=True)
    # {spf, dmarc, dkim_selectors, mx}: what DNS answered
    records = models.JSONField(default=dict, blank=True)
    checked_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["checked_at"], name="sender_domain_check_age_idx")]

    def __str__(self) -> str:
        return f"{self.domain}: {self.status}"

    @property
    def has_errors(self) -> bool:
        return self.status == self.Status.ERROR
