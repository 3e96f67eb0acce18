"""Approvals: what a drafter key asked to send, held until an admin or sender key
decides (docs/agents.md, "Approvals")."""

import uuid

from django.db import models
from django.db.models import Q


class Approval(models.Model):
    """One held send: the action and exactly what it would send. Approved, it runs once
    (outreach.approval_decisions); its status changes only by a conditional update from
    `pending` (outreach.approvals.transitions)."""

    class Action(models.TextChoices):
        DISPATCH = "dispatch"
        OUTREACH = "outreach"
        RESPOND = "respond"

    class Status(models.TextChoices):
        PENDING = "pending"
        APPROVED = "approved"
        REJECTED = "rejected"
        EXPIRED = "expired"
        FAILED = "failed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey("accounts.Account", on_delete=models.CASCADE, related_name="+")
    action = models.CharField(max_length=10, choices=Action.choices)
    # What the action sends. Ids, not foreign keys: a campaign or reply deleted meanwhile
    # makes the approval fail when approved (its 404), not vanish.
    campaign_id = models.UUIDField(null=True, blank=True)
    # dispatch: the contact_ids asked for, or null for all pending ones.
    contact_ids = models.JSONField(null=True, blank=True)
    # outreach: the contact as the request gave it (upserted when approved).
    contact = models.JSONField(null=True, blank=True)
    reply_id = models.UUIDField(null=True, blank=True)
    body_text = models.TextField(blank=True, default="")
    body_html = models.TextField(blank=True, default="")
    requested_by = models.ForeignKey("accounts.ApiKey", on_delete=models.CASCADE, related_name="+")
    decided_by = models.ForeignKey(
        "accounts.ApiKey", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    reason = models.TextField(blank=True, default="")
    # What running it did (approved) or why it could not (failed).
    outcome = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField()
    decided_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # Keyset pages (config.api.pagination): the order, tie-breaker included.
            models.Index(fields=["account", "created_at", "id"], name="approval_account_page_idx"),
            # The expiry's scan: pending ones by deadline.
            models.Index(
                fields=["expires_at"],
                name="approval_pending_expiry_idx",
                condition=Q(status="pending"),
            ),
            models.Index(fields=["requested_by"], name="approval_requested_by_idx"),
            models.Index(fields=["decided_by"], name="approval_decided_by_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.action} {self.status} ({self.pk})"
