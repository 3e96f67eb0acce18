"""Back office of intake (outreach.admin): the delivery reports that changed nothing."""

from django.contrib import admin

from config.admin_base import ReadOnlyAdmin
from outreach.models.intake import UnmatchedReport


@admin.register(UnmatchedReport)
class UnmatchedReportAdmin(ReadOnlyAdmin, admin.ModelAdmin):
    can_change = False
    list_display = ("received_at", "credential", "sender", "bounce_type", "detail")
    list_filter = ("bounce_type",)
    search_fields = ("account__email", "credential__from_email", "recipients", "report_id")
    list_select_related = ("credential",)
    raw_id_fields = ("account", "credential")
    show_full_result_count = False
    fields = (
        "account",
        "credential",
        "report_id",
        "sender",
        "subject",
        "detail",
        "recipients",
        "reason",
        "bounce_type",
        "bounce_category",
        "received_at",
    )
