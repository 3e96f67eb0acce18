"""A sender that protects its reputation (API.md 20; docs/deliverability.md).

- `ProviderPause`: one row per (mailbox, recipient provider) that was ever paused by the
  circuit breaker (outreach.sending.breaker): the pause in force until `until`, and how
  far its doubling has gone (`level`), kept to double the next one;
- `ProviderStrike`: a `block` bounce or a 4.7.x answer from a provider to a mailbox, kept
  for an hour: three within the last hour pause the pair;
- `MailboxComplaint`: a spam complaint about a message of a mailbox, for its complaint
  rate over the last 30 days (outreach.sending.complaints).
"""

import uuid

from django.db import models

from outreach.models.mailboxes import SmtpCredential


class RecipientProvider(models.TextChoices):
    GOOGLE = "google"
    MICROSOFT = "microsoft"
    YAHOO = "yahoo"
    APPLE = "apple"
    OTHER = "other"


class ThrottleReason(models.TextChoices):
    BLOCKS = "blocks"
    RATE_LIMITED = "rate_limited"


class ProviderPause(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # Indexed by the unique pair, which leads with it.
    credential = models.ForeignKey(
        SmtpCredential, on_delete=models.CASCADE, related_name="provider_pauses", db_index=False
    )
    provider = models.CharField(max_length=10, choices=RecipientProvider.choices)
    # The latest pause: from paused_at to until (the pair sends again after it).
    paused_at = models.DateTimeField()
    until = models.DateTimeField()
    # Pauses in the doubling series: 1 hour × 2^(level-1), at most 24 hours; the series
    # starts again at 1 after 24 hours without a pause.
    level = models.PositiveSmallIntegerField(default=1)
    reason = models.CharField(max_length=16, choices=ThrottleReason.choices)
    # The server's words on the strike that made the pause.
    detail = models.TextField(blank=True, default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["credential", "provider"], name="providerpause_pair_unique"
            )
        ]
        # The pauses in force, read once per scheduler run (few rows: one per pair).
        indexes = [models.Index(fields=["until"], name="providerpause_until_idx")]

    def __str__(self) -> str:
        return f"{self.credential_id} → {self.provider} until {self.until:%Y-%m-%d %H:%M}"


class ProviderStrike(models.Model):
    id = models.BigAutoField(primary_key=True)
    credential = models.ForeignKey(
        SmtpCredential, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    provider = models.CharField(max_length=10, choices=RecipientProvider.choices)
    at = models.DateTimeField()
    reason = models.CharField(max_length=16, choices=ThrottleReason.choices)

    class Meta:
        indexes = [
            models.Index(fields=["credential", "provider", "at"], name="providerstrike_pair_idx")
        ]

    def __str__(self) -> str:
        return f"{self.reason} from {self.provider} at {self.at:%Y-%m-%d %H:%M}"


class MailboxComplaint(models.Model):
    id = models.BigAutoField(primary_key=True)
    credential = models.ForeignKey(
        SmtpCredential, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["credential", "at"], name="mailboxcomplaint_recent_idx")]

    def __str__(self) -> str:
        return f"complaint at {self.at:%Y-%m-%d %H:%M}"
