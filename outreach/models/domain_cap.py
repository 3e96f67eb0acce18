"""Sends to one recipient domain on one UTC day, per account."""

from django.db import models


class RecipientDomainCount(models.Model):
    """Sends (reserved by a claim, or made) of one account to the addresses of one domain
    on one UTC day. A send claim names the row it reserved a unit of
    (SendClaim.domain_count_id), so a claim that does not send gives the unit back to
    the day it was taken on."""

    account = models.ForeignKey("accounts.Account", on_delete=models.CASCADE, related_name="+")
    # Lower case, Unicode form, as contacts' addresses are stored.
    domain = models.CharField(max_length=253)
    day = models.DateField()
    count = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["account", "domain", "day"], name="recipient_domain_count_unique"
            )
        ]
        indexes = [models.Index(fields=["day"], name="recipient_domain_count_day_idx")]

    def __str__(self) -> str:
        return f"{self.domain} on {self.day}: {self.count}"
