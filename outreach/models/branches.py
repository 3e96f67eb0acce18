"""The decisions of branches (API.md 17): one row per branch an enrollment passed, with
its outcome and when, written in the decision's transaction. The thread of the
enrollment shows them between its messages (outreach.conversations)."""

from django.db import models

from outreach.models.sending import Enrollment


class BranchDecision(models.Model):
    class Outcome(models.TextChoices):
        THEN = "then"
        ELSE = "else"

    id = models.BigAutoField(primary_key=True)
    # Indexed by branchdecision_enrollment_idx, which leads with it.
    enrollment = models.ForeignKey(
        Enrollment, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    # The branch's key, and the key it led to ("end": none).
    key = models.CharField(max_length=40)
    outcome = models.CharField(max_length=4, choices=Outcome.choices)
    next_key = models.CharField(max_length=40)
    decided_at = models.DateTimeField()

    class Meta:
        indexes = [
            # An enrollment's thread, its deletion.
            models.Index(fields=["enrollment", "decided_at"], name="branchdecision_enrollment_idx")
        ]

    def __str__(self) -> str:
        return f"{self.key} of {self.enrollment_id}: {self.outcome}"
