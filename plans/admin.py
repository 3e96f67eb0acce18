from django.contrib import admin, messages
from django.db.models import Count
from django.utils import timezone

from plans.models import Plan


@admin.register(Plan)
class PlanAdmin(admin.ModelAdmin):
    list_display = (
        "slug",
        "name",
        "tier",
        "monthly_limit",
        "psp_price_id",
        "public",
        "archived_at",
        "account_count",
    )
    list_filter = ("public", ("archived_at", admin.EmptyFieldListFilter))
    search_fields = ("slug", "name", "psp_price_id")
    ordering = ("tier", "slug")
    actions = ("archive", "unarchive")
    readonly_fields = ("created_at", "accounts_on_plan")

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(_account_count=Count("accounts"))

    @admin.display(description="Accounts", ordering="_account_count")
    def account_count(self, obj):
        return obj._account_count

    @admin.display(description="Accounts on this plan (first 100)")
    def accounts_on_plan(self, obj):
        if obj.pk is None:
            return "-"
        emails = list(obj.accounts.order_by("email").values_list("email", flat=True)[:100])
        return ", ".join(emails) or "none"

    @admin.action(description="Archive selected plans (no longer purchasable)")
    def archive(self, request, queryset):
        count = queryset.filter(archived_at__isnull=True).update(archived_at=timezone.now())
        self.message_user(request, f"Archived {count} plan(s).", messages.SUCCESS)

    @admin.action(description="Unarchive selected plans")
    def unarchive(self, request, queryset):
        count = queryset.exclude(archived_at__isnull=True).update(archived_at=None)
        self.message_user(request, f"Unarchived {count} plan(s).", messages.SUCCESS)
