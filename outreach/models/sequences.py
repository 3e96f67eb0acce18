"""Follow-up rules that acted (API.md 17): one row per enrollment and rule, so a rule
acts once however often its trigger comes (a label set twice, a completion seen by two
workers)."""

from django.db import models

from outreach.models.campaigns import Campaign
from outreach.models.sending import Enrollment


class RuleFire(models.Model):
    class Outcome(models.TextChoices):
        ENROLLED = "enrolled"
        ALREADY_ENROLLED = "already_enrolled"
        PENDING_OVER_CAP = "pending_over_cap"
        # Beyond API.md's three (docs/outreach.md, "Follow-up campaigns"): enrolled but
        # left pending (a draft target; a target that cannot send), or not enrolled.
        PENDING_DRAFT = "pending_draft"
        PENDING_NOT_SENDABLE = "pending_not_sendable"
        SUPPRESSED = "suppressed"
        BLOCKED = "blocked"

    id = models.BigAutoField(primary_key=True)
    # The enrollment whose reply or completion triggered the rule. Indexed by
    # rulefire_unique, which leads with it.
    enrollment = models.ForeignKey(
        Enrollment, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    # "reply:<label>" (an on_reply rule) or "complete" (on_complete).
    rule = models.CharField(max_length=40)
    # The campaign the contact was enrolled in.
    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="+")
    outcome = models.CharField(max_length=20, choices=Outcome.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["enrollment", "rule"], name="rulefire_unique")
        ]

    def __str__(self) -> str:
        return f"{self.rule} of {self.enrollment_id}: {self.outcome}"
