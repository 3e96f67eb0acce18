from django.contrib import admin, messages
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from accounts.models import Account, ApiKey, AuditEvent, IdempotencyRecord
from config.admin_base import ReadOnlyAdmin


class ApiKeyInline(ReadOnlyAdmin, admin.TabularInline):
    """Keys are shown, never edited here: their hash is not even displayed, and a
    key is issued through the API (the plaintext exists only in that response)."""

    model = ApiKey
    verbose_name = "API key"
    verbose_name_plural = "API keys"
    fields = ("prefix", "label", "client_kind", "created_at", "last_used_at", "revoked_at")
    extra = 0
    can_change = False
    can_delete = False
    show_change_link = False
    ordering = ("-created_at",)


@admin.register(Account)
class AccountAdmin(ReadOnlyAdmin, admin.ModelAdmin):
    """Accounts come from POST /signup, which also issues the first key."""

    list_display = (
        "email",
        "name",
        "plan",
        "psp_customer_id",
        "psp_subscription_status",
        "email_verified",
        "created_at",
    )
    list_filter = ("plan", ("email_verified_at", admin.EmptyFieldListFilter))
    search_fields = (
        "email",
        "name",
        "id",
        "plan__slug",
        "plan__name",
        "psp_customer_id",
        "psp_subscription_id",
    )
    list_select_related = ("plan",)
    ordering = ("-created_at",)
    fields = (
        "id",
        "email",
        "name",
        "plan",
        "psp_customer_id",
        "psp_subscription_id",
        "psp_subscription_status",
        "psp_current_period_start",
        "psp_current_period_end",
        "email_verified_at",
        "created_at",
        "audit_log",
    )
    # The provider's notifications own the others.
    editable = ("email", "name", "plan")
    inlines = [ApiKeyInline]
    actions = ["email_mark_verified"]

    @admin.display(boolean=True, description="Email verified", ordering="email_verified_at")
    def email_verified(self, obj: Account) -> bool:
        return obj.email_verified

    @admin.display(description="Audit log")
    def audit_log(self, obj: Account) -> str:
        url = reverse("admin:accounts_auditevent_changelist")
        return format_html('<a href="{}?account__id__exact={}">Audit events</a>', url, obj.pk)

    @admin.action(description="Mark the signup address verified")
    def email_mark_verified(self, request, queryset):
        """For support: an owner who proved the address another way (the link lost)."""
        count = queryset.filter(email_verified_at__isnull=True).update(
            email_verified_at=timezone.now()
        )
        self.message_user(request, f"{count} account(s) marked verified.", messages.SUCCESS)


@admin.register(IdempotencyRecord)
class IdempotencyRecordAdmin(ReadOnlyAdmin, admin.ModelAdmin):
    """Read-only view for support: which keys an account used, and with what outcome.
    The stored body is encrypted and not shown."""

    list_display = ("key", "account", "method", "path", "status", "response_status", "created_at")
    list_filter = ("status",)
    search_fields = ("key", "account__email", "path")
    list_select_related = ("account",)
    fields = (
        "account",
        "key",
        "method",
        "path",
        "status",
        "response_status",
        "response_headers",
        "fingerprint",
        "locked_at",
        "created_at",
        "completed_at",
    )
    can_change = False


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin, admin.ModelAdmin):
    """The audit log, read-only: every change to an account's data, by its keys, by the
    public (signup) and by staff. Opened from an account's page, filtered to it."""

    list_display = (
        "created_at",
        "account",
        "action",
        "resource_type",
        "resource_id",
        "actor_type",
        "actor_name",
        "request_id",
    )
    list_filter = ("actor_type", "resource_type")
    search_fields = ("=account__id", "account__email", "action", "=resource_id", "=request_id")
    list_select_related = ("account",)
    ordering = ("-created_at",)
    fields = (
        "id",
        "account",
        "created_at",
        "action",
        "resource_type",
        "resource_id",
        "actor_type",
        "actor_id",
        "actor_name",
        "actor_client_kind",
        "request_id",
        "idempotency_key",
        "ip",
        "changes",
    )
    can_change = False
    can_delete = False
