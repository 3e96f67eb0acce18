"""Back office of approvals (outreach.admin): every account's held sends, by status,
searchable by the account's email and the requesting key's prefix. Read only: an
approval is decided through the API, by a key of its account, so that the send runs
with that account's checks and is attributed to a key."""

from django.contrib import admin

from config.admin_base import ReadOnlyAdmin
from outreach.models.approvals import Approval


@admin.register(Approval)
class ApprovalAdmin(ReadOnlyAdmin, admin.ModelAdmin):
    list_display = ("id", "action", "status", "account", "requested_by", "created_at")
    list_filter = ("status", "action")
    search_fields = ("id", "account__email", "requested_by__prefix")
    list_select_related = ("account", "requested_by")
    show_full_result_count = False
    can_change = False
    can_delete = False
    ordering = ("-created_at",)
    fields = (
        "id",
        "account",
        "action",
        "status",
        "campaign_id",
        "contact_ids",
        "contact",
        "reply_id",
        "body_text",
        "body_html",
        "requested_by",
        "decided_by",
        "reason",
        "outcome",
        "created_at",
        "decided_at",
        "expires_at",
    )
