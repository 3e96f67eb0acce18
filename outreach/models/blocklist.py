"""The blocklist entry: one address or one domain an account never sends to."""

import uuid

from django.db import models


class BlocklistEntry(models.Model):
    class Kind(models.TextChoices):
        EMAIL = "email"
        DOMAIN = "domain"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey(
        "accounts.Account", on_delete=models.CASCADE, related_name="blocklist_entries"
    )
    # Normalised (outreach.blocklist.entries.entry_clean): an address lower-cased, or a
    # domain lower-cased in its Unicode form, as contacts' addresses are stored.
    value = models.CharField(max_length=254)
    kind = models.CharField(max_length=6, choices=Kind.choices)
    reason = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "blocklist entries"
        constraints = [
            # Also the index of every match: (account, value = ANY(keys)).
            models.UniqueConstraint(fields=["account", "value"], name="blocklist_entry_unique")
        ]
        indexes = [
            # Keyset pages (config.api.pagination): the order, tie-breaker included.
            models.Index(fields=["account", "created_at", "id"], name="blocklist_page_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.value} ({self.kind})"
