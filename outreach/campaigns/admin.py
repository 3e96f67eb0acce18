"""Back office of the campaigns (outreach.admin): steps and their variants' stats."""

from django.contrib import admin
from django.utils.html import format_html
from django.utils.text import Truncator

from config.admin_base import ReadOnlyAdmin
from outreach.admin_base import html_table
from outreach.campaigns import followups
from outreach.campaigns.selectors import campaign_step_stats, campaigns_with_counts
from outreach.campaigns.variants import step_content, step_letters
from outreach.enrollments import VARIANT_STAT_NAMES
from outreach.models.campaigns import Campaign, CampaignStep

# The list's name and account columns are cut to this many characters (the whole text
# in the tooltip), so the list fits a 1280 px window.
LIST_TEXT_CHARS = 40


class CampaignStepInline(ReadOnlyAdmin, admin.StackedInline):
    model = CampaignStep
    extra = 0
    fields = (
        "position",
        "key",
        "next_key",
        "branch",
        "subject",
        "body_text",
        "body_html",
        "delay_minutes",
        "variant_list",
    )
    can_delete = False

    @admin.display(description="A/B variants (besides A, the step's own content)")
    def variant_list(self, obj):
        rows = [
            (letter, content.subject, content.body_text, content.body_html or "-")
            for letter in step_letters(obj)[1:]
            for content in [step_content(obj, letter)]
        ]
        return html_table(("Variant", "Subject", "Text body", "HTML body"), rows)


@admin.register(Campaign)
class CampaignAdmin(ReadOnlyAdmin, admin.ModelAdmin):
    # Its numbers (enrollments sent, opened, replied: the API's stats) come in the list's
    # one query (campaigns_with_counts); long names are cut to fit 1280 px.
    list_display = (
        "name_shown",
        "status_shown",
        "sent_total",
        "opened_total",
        "replied_total",
        "account_shown",
        "created_at",
    )
    list_filter = ("status", "paused_reason")
    search_fields = ("name", "account__email")
    list_select_related = ("account",)
    inlines = (CampaignStepInline,)
    fields = (
        "id",
        "account",
        "name",
        "status",
        "paused_reason",
        "paused_at",
        "credential_list",
        "timezone",
        "send_window",
        "bounce_threshold_percent",
        "track_opens",
        "track_clicks",
        "stop_on_reply",
        "stop_on_domain_reply",
        "unsubscribe_footer",
        "variant_stats",
        "send_in_contact_timezone",
        "created_at",
        "updated_at",
    )
    editable = ("name",)

    def get_queryset(self, request):
        return campaigns_with_counts(super().get_queryset(request))

    @admin.display(description="Name", ordering="name")
    def name_shown(self, obj):
        return format_html(
            '<span title="{}">{}</span>', obj.name, Truncator(obj.name).chars(LIST_TEXT_CHARS)
        )

    @admin.display(description="Status", ordering="status")
    def status_shown(self, obj):
        """The status, and why when paused (manual, all_credentials_disabled)."""
        return f"{obj.status} ({obj.paused_reason})" if obj.paused_reason else obj.status

    @admin.display(description="Account", ordering="account__email")
    def account_shown(self, obj):
        email = obj.account.email
        return format_html(
            '<span title="{}">{}</span>', email, Truncator(email).chars(LIST_TEXT_CHARS)
        )

    @admin.display(description="Sent", ordering="sent_total")
    def sent_total(self, obj):
        return obj.sent_total

    @admin.display(description="Opened", ordering="opened_total")
    def opened_total(self, obj):
        return obj.opened_total

    @admin.display(description="Replied", ordering="replied_total")
    def replied_total(self, obj):
        return obj.replied_total

    # Deleting a campaign leaves the tombstones its sent emails' unsubscribe links need,
    # and drops the follow-up rules that name it (outreach.campaigns.followups).
    def delete_model(self, request, obj):
        followups.campaign_delete(account_id=obj.account_id, campaign_id=obj.pk)

    def delete_queryset(self, request, queryset):
        for account_id, campaign_id in queryset.values_list("account_id", "pk"):
            followups.campaign_delete(account_id=account_id, campaign_id=campaign_id)

    @admin.display(description="Credentials")
    def credential_list(self, obj):
        return ", ".join(c.from_email for c in obj.credentials.all()) or "none"

    @admin.display(description="Stats per step and variant")
    def variant_stats(self, obj):
        rows = [
            (step["position"], *(variant[k] for k in ("variant", *VARIANT_STAT_NAMES)))
            for step in campaign_step_stats(campaign=obj)
            for variant in step["variants"]
        ]
        return html_table(("Step", "Variant", "Sent", "Opened", "Replied", "Bounced"), rows)
