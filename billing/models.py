import uuid
from collections.abc import Iterable

from django.db import models
from django.db.models.functions import Coalesce

from accounts.models import Account


class UsageRecordManager(models.Manager["UsageRecord"]):
    """Every record read with its `sends_count`: the sum of its UsageCount shards (0
    before any), in the same SELECT."""

    def get_queryset(self) -> models.QuerySet["UsageRecord"]:
        shards = (
            UsageCount.objects.filter(record=models.OuterRef("pk"))
            .order_by()
            .values("record")
            .annotate(total=models.Sum("sends"))
            .values("total")
        )
        total = Coalesce(models.Subquery(shards), 0, output_field=models.PositiveIntegerField())
        # The model declares the attribute (for its readers): the stubs take it for a clash.
        return super().get_queryset().annotate(sends_count=total)  # type: ignore[no-redef]


class UsageRecord(models.Model):
    """Sends metered in one billing period of one account.

    An account's records never overlap: each send is counted in exactly one
    record (see billing.usage.usage_record_current and docs/billing.md).

    The count is kept in UsageCount rows (shards) and read as their sum: every read
    of a record (the manager, also the base manager: related objects, deletions)
    carries it as `sends_count`.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey(
        "accounts.Account", on_delete=models.CASCADE, related_name="usage_records"
    )
    period_start = models.DateTimeField()
    period_end = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)

    # The sum of the record's shards, read with it (UsageRecordManager).
    sends_count: int

    objects = UsageRecordManager()

    class Meta:
        ordering = ["-period_start"]
        base_manager_name = "objects"
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

    def refresh_from_db(
        self,
        using: str | None = None,
        fields: Iterable[str] | None = None,
        from_queryset: "models.QuerySet[UsageRecord] | None" = None,
    ) -> None:
        """Django reads the columns again; the count, not one, is read here as well (when
        all of the row is asked for, or `sends_count` by name)."""
        names = None if fields is None else list(fields)
        columns = None if names is None else [name for name in names if name != "sends_count"]
        if columns is None or columns:
            super().refresh_from_db(using=using, fields=columns, from_queryset=from_queryset)
        if names is None or "sends_count" in names:
            records = UsageRecord.objects.using(using or self._state.db)
            self.sends_count = records.get(pk=self.pk).sends_count


class UsageCount(models.Model):
    """A part of a usage record's count: a send adds 1 to one of COUNTER_SHARDS rows
    of its record, drawn at random, so that concurrent sends of one account seldom wait
    on each other's row lock until their commit (config/db/counters.py). A shard's row
    is made by the first send that draws it."""

    record = models.ForeignKey(
        UsageRecord, on_delete=models.CASCADE, related_name="counts", db_index=False
    )
    shard = models.PositiveSmallIntegerField()
    sends = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            # Also the index of the foreign key (it leads with record).
            models.UniqueConstraint(fields=["record", "shard"], name="usage_count_record_shard")
        ]

    def __str__(self) -> str:
        return f"{self.record_id} shard {self.shard}: {self.sends}"


class PspEvent(models.Model):
    """One payment provider notification (a Stripe event), recorded once by its id.

    The row is what makes a repeated delivery a no-op, and what staff read to see
    what the provider told us and what came of it.
    """

    class Outcome(models.TextChoices):
        PROCESSED = "processed", "Applied to the account"
        IGNORED = "ignored", "Nothing to do"
        UNMAPPED = "unmapped", "Could not be mapped (logged)"
        UNKNOWN_CUSTOMER = "unknown_customer", "No account has this customer"

    id = models.CharField(primary_key=True, max_length=255, help_text="The Stripe event id.")
    type = models.CharField(max_length=100)
    account = models.ForeignKey(
        "accounts.Account",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="psp_events",
    )
    psp_customer_id = models.CharField(max_length=255, blank=True, default="")
    psp_subscription_id = models.CharField(max_length=255, blank=True, default="")
    outcome = models.CharField(max_length=20, choices=Outcome.choices)
    detail = models.CharField(max_length=500, blank=True, default="")
    payload = models.JSONField(help_text="The event as received.")
    received_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-received_at"]
        verbose_name = "payment provider event"

    def __str__(self) -> str:
        return f"{self.id} {self.type} ({self.outcome})"


class BillingAccount(Account):
    """The billing side of an account in the admin: its plan (staff may assign any
    plan, private ones included), its subscription and its usage records."""

    class Meta:
        proxy = True
        verbose_name = "account billing"
        verbose_name_plural = "account billing"


class CheckoutSession(models.Model):
    """A hosted checkout an account started. At most one per account is being created
    or open at a time (the constraint), so an account cannot start two subscriptions by
    opening two checkouts."""

    class Status(models.TextChoices):
        CREATING = "creating", "Being created at the provider"
        OPEN = "open", "Open: its page can still start a subscription"
        COMPLETE = "complete", "Completed"
        EXPIRED = "expired", "Expired"
        FAILED = "failed", "Never created"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey(
        "accounts.Account", on_delete=models.CASCADE, related_name="checkout_sessions"
    )
    plan_slug = models.CharField(max_length=64)
    psp_session_id = models.CharField(max_length=255, blank=True, default="")
    url = models.TextField(blank=True, default="")
    status = models.CharField(max_length=20, choices=Status.choices)
    expires_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["account"],
                condition=models.Q(status__in=["creating", "open"]),
                name="checkout_one_unfinished_per_account",
            )
        ]

    def __str__(self) -> str:
        return f"{self.account_id} {self.plan_slug} ({self.status})"
