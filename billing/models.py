import uuid

from django.db import models


class UsageRecord(models.Model):
    """Sends metered in one billing period of one account."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey(
        "accounts.Account", on_delete=models.CASCADE, related_name="usage_records"
    )
    period_start = models.DateTimeField()
    period_end = models.DateTimeField()
    sends_count = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-period_start"]
        constraints = [
            models.UniqueConstraint(
                fields=["account", "period_start"], name="usage_account_period_unique"
            ),
            models.CheckConstraint(
                condition=models.Q(period_end__gt=models.F("period_start")),
                name="usage_period_order",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.account_id} {self.period_start:%Y-%m-%d}: {self.sends_count}"
