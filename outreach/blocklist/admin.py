"""Back office of the blocklist (outreach.admin): every account's entries, searchable by
value and by the account's email. Entries are added through the API (which normalises
them); staff may delete one."""

from django.contrib import admin

from config.admin_base import ReadOnlyAdmin
from outreach.models.blocklist import BlocklistEntry


@admin.register(BlocklistEntry)
class BlocklistEntryAdmin(ReadOnlyAdmin, admin.ModelAdmin):
    list_display = ("value", "kind", "account", "reason", "created_at")
    list_filter = ("kind",)
    search_fields = ("value", "account__email")
    list_select_related = ("account",)
    show_full_result_count = False
    fields = ("id", "account", "value", "kind", "reason", "created_at")
