"""Back office of the contacts, the suppression list and contact imports
(outreach.admin), searchable by email."""

from django.contrib import admin

from config.admin_base import ReadOnlyAdmin
from outreach import enrollments
from outreach.models.contacts import Contact, ContactImport, Suppression


@admin.register(Contact)
class ContactAdmin(ReadOnlyAdmin, admin.ModelAdmin):
    list_display = (
        "email",
        "account",
        "first_name",
        "last_name",
        "company",
        "unsubscribed_at",
        "bounced_at",
    )
    list_filter = (
        ("unsubscribed_at", admin.EmptyFieldListFilter),
        ("bounced_at", admin.EmptyFieldListFilter),
    )
    search_fields = ("email_lower", "account__email", "company")
    list_select_related = ("account",)
    show_full_result_count = False
    fields = (
        "id",
        "account",
        "email",
        "first_name",
        "last_name",
        "company",
        "fields",
        "timezone",
        "unsubscribed_at",
        "bounced_at",
        "created_at",
        "updated_at",
    )
    editable = ("first_name", "last_name", "company")

    def get_search_results(self, request, queryset, search_term):
        # Emails are stored lower-cased in email_lower: search it lower-cased too.
        return super().get_search_results(request, queryset, search_term.lower())

    # Deleting a contact deletes its enrollments: through the service that takes them
    # out of their campaigns' stats.
    def delete_model(self, request, obj):
        enrollments.contact_delete(contact=obj)

    def delete_queryset(self, request, queryset):
        for contact in queryset:
            enrollments.contact_delete(contact=contact)


@admin.register(Suppression)
class SuppressionAdmin(ReadOnlyAdmin, admin.ModelAdmin):
    """The account's suppression list (outreach.contacts.suppression). Entries are only ever
    added by unsubscribes, complaints and bounces; staff may delete a mistaken one."""

    list_display = ("email_lower", "account", "reason", "at")
    list_filter = ("reason",)
    search_fields = ("email_lower", "account__email")
    list_select_related = ("account",)
    show_full_result_count = False
    fields = ("account", "email_lower", "reason", "at", "created_at")

    def get_search_results(self, request, queryset, search_term):
        return super().get_search_results(request, queryset, search_term.lower())


@admin.register(ContactImport)
class ContactImportAdmin(ReadOnlyAdmin, admin.ModelAdmin):
    list_display = (
        "id",
        "account",
        "status",
        "filename",
        "processed_rows",
        "total_rows",
        "created_count",
        "updated_count",
        "skipped_count",
        "created_at",
    )
    list_filter = ("status", "source_format")
    search_fields = ("account__email", "filename")
    list_select_related = ("account",)
    fields = (
        "id",
        "account",
        "campaign",
        "status",
        "source_format",
        "filename",
        "total_rows",
        "processed_rows",
        "created_count",
        "updated_count",
        "skipped_count",
        "errors",
        "failure_reason",
        "attempts",
        "heartbeat_at",
        "created_at",
        "started_at",
        "completed_at",
    )

    def get_queryset(self, request):
        return super().get_queryset(request).defer("source_data")
