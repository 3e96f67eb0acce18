"""Back office of the campaigns (outreach.admin): steps and their variants' stats."""

from django.contrib import admin

from config.admin_base import ReadOnlyAdmin
from outreach.admin_base import html_table
from outreach.campaigns import followups
from outreach.campaigns.selectors import campaign_step_stats
from outreach.campaigns.variants import step_content, step_letters
from outreach.enrollments import VARIANT_STAT_NAMES
from outreach.models.campaigns import Campaign, CampaignStep


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
    list_display = ("name", "account", "status", "paused_reason", "timezone", "created_at")
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
