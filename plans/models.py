from typing import Any, cast

from django.db import models
from django.db.models import Q

# The purchasable rule, its one definition: each condition a plan must meet, with the
# reason checkout gives for a plan that fails it, in the order checkout names them.
# PlanQuerySet.purchasable filters on all of them (what GET /plans lists);
# Plan.unpurchasable_reason reads them on one plan (what checkout refuses).
PURCHASABLE_RULE: tuple[tuple[str, Q], ...] = (
    ("private", Q(public=True)),
    ("archived", Q(archived_at__isnull=True)),
    ("unpriced", ~Q(psp_price_id__isnull=True) & ~Q(psp_price_id="")),
)


def _holds(plan: "Plan", condition: Q) -> bool:
    """Whether `plan` meets `condition`, read on the instance. The rule uses `exact`
    and `isnull` lookups only; another one is refused rather than guessed."""
    met = []
    for child in condition.children:
        if isinstance(child, Q):
            met.append(_holds(plan, child))
            continue
        lookup, expected = cast(tuple[str, Any], child)
        name, _, kind = lookup.partition("__")
        value = getattr(plan, name)
        if kind == "isnull":
            met.append((value is None) == expected)
        elif kind in ("", "exact"):
            met.append(value is not None and value == expected)  # SQL: NULL = x is not true
        else:
            raise ValueError(f"the purchasable rule cannot read the lookup {lookup!r}")
    holds = all(met) if condition.connector == Q.AND else any(met)
    return holds != condition.negated


class PlanQuerySet(models.QuerySet["Plan"]):
    def purchasable(self) -> "PlanQuerySet":
        """Public, paid and not archived: what GET /plans lists and checkout sells."""
        return self.filter(*(condition for _, condition in PURCHASABLE_RULE))

    def refused_as(self, reason: str) -> "PlanQuerySet":
        """The plans checkout refuses with `reason` (Plan.unpurchasable_reason, whose
        first failed condition it is): they meet the rule's conditions before it and fail
        its own. `free` and `unpriced` fail the same condition, on tier 0 and above it."""
        names = [name for name, _ in PURCHASABLE_RULE]
        index = names.index("unpriced" if reason == "free" else reason)
        met = [condition for _, condition in PURCHASABLE_RULE[:index]]
        refused = self.filter(*met).filter(~PURCHASABLE_RULE[index][1])
        if reason == "free":
            return refused.filter(tier=0)
        return refused.filter(tier__gt=0) if reason == "unpriced" else refused


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

    def unpurchasable_reason(self) -> str | None:
        """Why checkout refuses this plan (PURCHASABLE_RULE), or None. A plan without a
        price is `free` on tier 0 and `unpriced` above it: a paid plan whose Stripe price
        is not configured."""
        for reason, condition in PURCHASABLE_RULE:
            if not _holds(self, condition):
                return "free" if reason == "unpriced" and self.tier == 0 else reason
        return None


FREE_PLAN_SLUG = "free"
