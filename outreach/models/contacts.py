"""Contact models: contacts, suppressions, contact imports."""

import uuid
from typing import Any

from django.db import models
from django.db.models import Q

from outreach.models.campaigns import Campaign


class Contact(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey(
        "accounts.Account", on_delete=models.CASCADE, related_name="contacts"
    )
    email = models.EmailField(max_length=254)
    # lower(email): the per-account uniqueness key, a plain column so imports can
    # upsert on it (ON CONFLICT needs columns, not expressions).
    email_lower = models.CharField(max_length=254, editable=False)
    first_name = models.CharField(max_length=200, blank=True, default="")
    last_name = models.CharField(max_length=200, blank=True, default="")
    company = models.CharField(max_length=200, blank=True, default="")
    fields = models.JSONField(default=dict, blank=True)
    # IANA name (outreach.timezones.timezone_valid), or "": the campaign's zone applies.
    timezone = models.CharField(max_length=64, blank=True, default="")
    # Either one suppresses the contact: never enrolled or sent to again. Each is the time
    # of the event (a bounce, an unsubscribe, the address's first suppression copied from
    # the suppression list), not of the write; every write that suppresses a contact
    # stamps updated_at with the wall clock, which the scheduler's sweep reads.
    unsubscribed_at = models.DateTimeField(null=True, blank=True)
    bounced_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["account", "email_lower"], name="contact_email_ci_unique"
            )
        ]
        indexes = [
            # Keyset pages (config.api.pagination): the order, tie-breaker included.
            models.Index(fields=["account", "created_at", "id"], name="contact_account_page_idx"),
            # The suppressed contacts by the time their row was last written: the
            # scheduler's sweep reads those written since its last look
            # (outreach.sending.recovery.suppressed_end). Only suppressed rows have an
            # entry, and only their writes write one.
            models.Index(
                fields=["updated_at"],
                name="contact_suppressed_written_idx",
                condition=Q(unsubscribed_at__isnull=False) | Q(bounced_at__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return self.email

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.email_lower = self.email.lower()
        update_fields = kwargs.get("update_fields")
        if update_fields is not None and "email" in update_fields:
            kwargs["update_fields"] = {*update_fields, "email_lower"}
        super().save(*args, **kwargs)

    @property
    def is_suppressed(self) -> bool:
        return self.unsubscribed_at is not None or self.bounced_at is not None


class Suppression(models.Model):
    """An address the account must never send to again, whatever happens to its contact
    row: it outlives DELETE /contacts/:id, so re-adding the address (API, import,
    outreach) brings the contact back suppressed (outreach.contacts.suppression).

    One row per (address, reason); the first time wins (`at` is never moved later).
    """

    class Reason(models.TextChoices):
        UNSUBSCRIBED = "unsubscribed"
        BOUNCED = "bounced"
        COMPLAINED = "complained"  # a spam complaint: suppresses as an unsubscribe

    account = models.ForeignKey(
        "accounts.Account", on_delete=models.CASCADE, related_name="suppressions"
    )
    email_lower = models.CharField(max_length=254)
    reason = models.CharField(max_length=12, choices=Reason.choices)
    at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["account", "email_lower", "reason"], name="suppression_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.email_lower} ({self.reason})"


class ContactImport(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"
        PROCESSING = "processing"
        COMPLETED = "completed"
        FAILED = "failed"

    class Format(models.TextChoices):
        CSV = "csv"
        JSON = "json"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey(
        "accounts.Account", on_delete=models.CASCADE, related_name="contact_imports"
    )
    campaign = models.ForeignKey(
        Campaign, on_delete=models.SET_NULL, null=True, blank=True, related_name="imports"
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    source_format = models.CharField(max_length=4, choices=Format.choices)
    filename = models.CharField(max_length=255, blank=True, default="")
    # The uploaded bytes (CSV, or the JSON contacts array), kept in the database so any
    # worker can process them; emptied once the import ends.
    source_data = models.BinaryField(default=b"")
    total_rows = models.PositiveIntegerField(null=True, blank=True)
    processed_rows = models.PositiveIntegerField(default=0)
    created_count = models.PositiveIntegerField(default=0)
    updated_count = models.PositiveIntegerField(default=0)
    skipped_count = models.PositiveIntegerField(default=0)
    # First 100 {row, email, message} of the rows skipped as invalid.
    errors = models.JSONField(default=list, blank=True)
    failure_reason = models.TextField(blank=True, default="")
    # Worker runs that claimed it; each batch is committed only by the current run.
    attempts = models.PositiveSmallIntegerField(default=0)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # Keyset pages (config.api.pagination): the order, tie-breaker included.
            models.Index(fields=["account", "created_at", "id"], name="import_account_page_idx"),
            models.Index(
                fields=["status", "heartbeat_at"],
                name="import_unfinished_idx",
                condition=Q(status__in=["pending", "processing"]),
            ),
        ]

    def __str__(self) -> str:
        return f"import {self.id} ({self.status})"
