"""Back office of the sender domain checks (outreach.admin): which mailboxes' From
domains fail SPF, DKIM or DMARC, and why."""

from django.contrib import admin

from config.admin_base import ReadOnlyAdmin
from outreach.admin_base import html_table
from outreach.models.domains import SenderDomainCheck


@admin.register(SenderDomainCheck)
class SenderDomainCheckAdmin(ReadOnlyAdmin, admin.ModelAdmin):
    list_display = ("domain", "status", "finding_codes", "credential", "account", "checked_at")
    list_filter = ("status",)
    search_fields = ("domain", "credential__from_email", "credential__account__email")
    list_select_related = ("credential__account",)
    ordering = ("-checked_at",)
    fields = (
        "credential",
        "account",
        "domain",
        "status",
        "checked_at",
        "findings_table",
        "records",
        "dkim_selectors",
    )

    @admin.display(description="account")
    def account(self, obj) -> str:
        return obj.credential.account.email

    @admin.display(description="findings")
    def finding_codes(self, obj) -> str:
        return ", ".join(f["code"] for f in obj.findings) or "-"

    @admin.display(description="findings")
    def findings_table(self, obj) -> str:
        return html_table(
            ("code", "level", "message"),
            [(f["code"], f["level"], f["message"]) for f in obj.findings],
        )
