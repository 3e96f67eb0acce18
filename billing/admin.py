"""Billing in the admin: per-account plan assignment (private plans included) with
the account's usage records, the usage records themselves, and the provider
events received.

The accounts admin can link an account to its billing page:
reverse("admin:billing_billingaccount_change", args=[account.pk]).
"""

from django import forms
from django.contrib import admin, messages

from billing.errors import PspUnavailable
from billing.models import BillingAccount, PspEvent, UsageRecord
from billing.subscriptions import account_plan_assign, subscription_sync
from config.admin_base import ReadOnlyAdmin
from plans.models import Plan


class SendsCountShown:
    """A record's `sends_count`, which is no column (the sum of its shards, annotated
    by UsageRecord's manager on every row the admin reads), as a read-only field."""

    @admin.display(description="sends count", ordering="sends_count")
    def sends_count(self, record: UsageRecord) -> int:
        return record.sends_count


class UsageRecordInline(SendsCountShown, ReadOnlyAdmin, admin.TabularInline):
    model = UsageRecord
    fields = ("period_start", "period_end", "sends_count", "created_at")
    ordering = ("-period_start",)
    extra = 0
    can_delete = False
    show_change_link = True


class BillingAccountForm(forms.ModelForm):
    plan = forms.ModelChoiceField(
        queryset=Plan.objects.order_by("tier", "slug"),
        help_text=(
            "Any plan, private ones included. A later subscription notification "
            "from Stripe overrides a plan assigned here."
        ),
    )

    class Meta:
        model = BillingAccount
        fields = ("plan",)


@admin.register(BillingAccount)
class BillingAccountAdmin(ReadOnlyAdmin, admin.ModelAdmin):
    """Accounts are made by signup; staff assign a plan."""

    form = BillingAccountForm
    list_display = (
        "email",
        "plan",
        "psp_customer_id",
        "psp_subscription_id",
        "psp_subscription_status",
        "psp_current_period_end",
    )
    list_filter = ("plan", "psp_subscription_status")
    list_select_related = ("plan",)
    search_fields = ("email", "name", "psp_customer_id", "psp_subscription_id")
    fields = (
        "email",
        "name",
        "plan",
        "psp_customer_id",
        "psp_subscription_id",
        "psp_subscription_status",
        "psp_current_period_start",
        "psp_current_period_end",
    )
    editable = ("plan",)
    can_delete = False
    inlines = [UsageRecordInline]
    actions = ["resync_from_stripe"]

    def save_model(self, request, obj, form, change):
        if "plan" in form.changed_data:
            account_plan_assign(account=obj, plan=form.cleaned_data["plan"])

    @admin.action(description="Re-read the subscription from Stripe")
    def resync_from_stripe(self, request, queryset):
        for account in queryset.filter(psp_subscription_id__isnull=False):
            try:
                outcome, detail = subscription_sync(account=account)
            except PspUnavailable:
                self.message_user(request, f"{account}: Stripe unavailable", messages.ERROR)
                continue
            self.message_user(request, f"{account}: {outcome} ({detail})", messages.INFO)


@admin.register(UsageRecord)
class UsageRecordAdmin(SendsCountShown, ReadOnlyAdmin, admin.ModelAdmin):
    list_display = ("account", "period_start", "period_end", "sends_count")
    list_select_related = ("account",)
    search_fields = ("account__email",)
    date_hierarchy = "period_start"
    readonly_fields = ("account", "period_start", "period_end", "sends_count", "created_at")


@admin.register(PspEvent)
class PspEventAdmin(ReadOnlyAdmin, admin.ModelAdmin):
    list_display = ("id", "type", "outcome", "account", "psp_customer_id", "received_at")
    list_filter = ("outcome", "type")
    list_select_related = ("account",)
    search_fields = ("id", "psp_customer_id", "psp_subscription_id", "account__email")
    readonly_fields = (
        "id",
        "type",
        "outcome",
        "detail",
        "account",
        "psp_customer_id",
        "psp_subscription_id",
        "payload",
        "received_at",
    )
    can_change = False
