from typing import Any

from django.db import models
from django.db.models import Q


class PlanQuerySet(models.QuerySet["Plan"]):
    def purchasable(self) -> "PlanQuerySet":
        """Public, paid and not archived: what GET /plans lists and checkout sells."""
        return (
            self.filter(public=True, archived_at__isnull=True)
            .exclude(psp_price_id__isnull=True)
            .exclude(psp_price_id="")
        )


class Plan(models.Model):
    slug = models.SlugField(
        max_length=64, unique=True, help_text="Stable identifier, used in checkout."
    )
    name = models.CharField(max_length=100)
    tier = models.PositiveIntegerField(help_text="Higher means more capable; gates features.")
    monthly_limit = models.PositiveIntegerField(help_text="Sends per billing period.")
    psp_price_id = models.CharField(
        max_length=255,
        null=True,
        blank=True,
        unique=True,
        help_text="Stripe price id. Empty for free plans.",
    )
    public = models.BooleanField(
        default=True, help_text="Private plans are assigned by staff only."
    )
    archived_at = models.DateTimeField(
        null=True, blank=True, help_text="Archived plans are not purchasable."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = PlanQuerySet.as_manager()

    class Meta:
        ordering = ["tier", "slug"]
        indexes = [
            models.Index(
                fields=["tier"],
                name="plan_purchasable_idx",
                condition=Q(public=True, archived_at__isnull=True),
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.slug})"

    def save(self, *args: Any, **kwargs: Any) -> None:
        # An empty price id means "none": keep it NULL so the unique index allows many.
        if not self.psp_price_id:
            self.psp_price_id = None
        super().save(*args, **kwargs)

    @property
    def is_paid(self) -> bool:
        return bool(self.psp_price_id)

    @property
    def is_archived(self) -> bool:
        return self.archived_at is not None


FREE_PLAN_SLUG = "free"
