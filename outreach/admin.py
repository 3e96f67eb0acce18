"""Back office: read-mostly views of the outreach resources, searchable by email.

Secrets (SMTP/IMAP passwords, relay signing keys) are excluded from every form and
list: the admin shows only whether one is set. Changes that have rules (dispatch,
pause, imports) go through the API, so the admin only edits harmless attributes.
"""

from django.contrib import admin
from django.utils.html import format_html, format_html_join

from outreach import enrollments
from outreach.campaigns.models import Campaign, CampaignStep
from outreach.campaigns.selectors import campaign_step_stats
from outreach.campaigns.variants import step_content, step_letters
from outreach.contacts.models import Contact, ContactImport, Suppression
from outreach.enrollments import VARIANT_STAT_NAMES
from outreach.mailboxes.models import SmtpCredential
from outreach.sending.models import CredentialCampaignStats, Enrollment


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request, obj=None):
        return False

    def get_readonly_fields(self, request, obj=None):
        shown = [f for f in self.get_fields(request, obj) if f not in self.editable]
        return shown

    editable: tuple[str, ...] = ()


@admin.register(SmtpCredential)
class SmtpCredentialAdmin(ReadOnlyAdmin):
    # Health first: a narrow window still shows which mailboxes are disabled or failing.
    list_display = (
        "from_email",
        "disabled_at",
        "last_error_at",
        "disabled_reason",
        "bounce_rate",
        "auth_method",
        "oauth_status",
        "account",
        "smtp_host",
        "daily_limit",
        "pace",
        "next_send_earliest_at",
        "sent_count",
        "bounced_count",
    )
    list_filter = (
        "auth_method",
        "oauth_status",
        "smtp_security",
        "relay_provider",
        ("disabled_at", admin.EmptyFieldListFilter),
    )
    search_fields = ("from_email", "account__email", "smtp_host")
    list_select_related = ("account",)
    fields = (
        "id",
        "account",
        "from_email",
        "from_name",
        "auth_method",
        "oauth_status",
        "oauth_hint",
        "oauth_access_token_expires_at",
        "smtp_host",
        "smtp_port",
        "smtp_username",
        "smtp_security",
        "smtp_password_set",
        "imap_host",
        "imap_port",
        "imap_username",
        "imap_security",
        "imap_password_set",
        "imap_uidvalidity",
        "imap_last_uid",
        "imap_last_polled_at",
        "imap_last_error",
        "imap_last_error_at",
        "relay_provider",
        "relay_signing_key_set",
        "daily_limit",
        "daily_sent_count",
        "daily_sent_on",
        "min_interval_seconds",
        "max_interval_seconds",
        "next_send_earliest_at",
        "sent_count",
        "bounced_count",
        "bounce_rate",
        "disabled_at",
        "disabled_reason",
        "last_error",
        "last_error_at",
        "created_at",
    )
    editable = ("daily_limit", "from_name", "min_interval_seconds", "max_interval_seconds")

    @admin.display(description="Pace")
    def pace(self, obj):
        """The gap between two sends of the mailbox (outreach.sending.scheduler)."""
        if not obj.is_paced:
            return "off"
        return f"{obj.min_interval_seconds}-{obj.max_interval_seconds} s"

    @admin.display(description="Bounce rate")
    def bounce_rate(self, obj):
        # Over all campaigns: bounces / (accepted sends + bounces). Auto-disable judges
        # each campaign separately: see "Sends by campaign" below.
        attempts = obj.sent_count + obj.bounced_count
        return f"{100.0 * obj.bounced_count / attempts:.1f}%" if attempts else "-"

    @admin.display(description="OAuth")
    def oauth_hint(self, obj):
        """What to do about an OAuth mailbox (its tokens are never shown)."""
        if not obj.uses_oauth:
            return "-"
        provider = "google" if obj.auth_method == obj.AuthMethod.OAUTH_GOOGLE else "microsoft"
        if obj.oauth_status == obj.OAuthStatus.REAUTHORIZATION_REQUIRED:
            return format_html(
                "<strong>Re-authorization required.</strong> Its sends and reply polling "
                "wait. The account connects it again with <code>POST "
                '/smtp_credentials/oauth</code> <code>{{"provider": "{}"}}</code>, '
                "signing in as {} at the provider; the mailbox keeps its settings and "
                "threads.",
                provider,
                obj.from_email,
            )
        return format_html(
            "Connected with {}; access tokens are refreshed as needed.", provider.title()
        )

    @admin.display(boolean=True, description="SMTP password set")
    def smtp_password_set(self, obj):
        return bool(obj.smtp_password)

    @admin.display(boolean=True, description="IMAP password set")
    def imap_password_set(self, obj):
        return bool(obj.imap_password)

    @admin.display(boolean=True, description="Relay signing key set")
    def relay_signing_key_set(self, obj):
        return bool(obj.relay_signing_key)


class CampaignStepInline(admin.StackedInline):
    model = CampaignStep
    extra = 0
    fields = ("position", "subject", "body_text", "body_html", "delay_minutes", "variant_list")
    readonly_fields = fields
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False

    @admin.display(description="A/B variants (besides A, the step's own content)")
    def variant_list(self, obj):
        rows = [
            (letter, content.subject, content.body_text, content.body_html or "-")
            for letter in step_letters(obj)[1:]
            for content in [step_content(obj, letter)]
        ]
        return _table(("Variant", "Subject", "Text body", "HTML body"), rows)


@admin.register(Campaign)
class CampaignAdmin(ReadOnlyAdmin):
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
        "stop_on_reply",
        "stop_on_domain_reply",
        "unsubscribe_footer",
        "variant_stats",
        "send_in_contact_timezone",
        "created_at",
        "updated_at",
    )
    editable = ("name",)

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
        return _table(("Step", "Variant", "Sent", "Opened", "Replied", "Bounced"), rows)


@admin.register(Contact)
class ContactAdmin(ReadOnlyAdmin):
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
class SuppressionAdmin(ReadOnlyAdmin):
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
class ContactImportAdmin(ReadOnlyAdmin):
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


@admin.register(Enrollment)
class EnrollmentAdmin(ReadOnlyAdmin):
    list_display = (
        "contact",
        "campaign",
        "status",
        "current_step",
        "next_send_at",
        "sent_at",
        "replied_at",
    )
    list_filter = ("status", "stop_reason")
    search_fields = ("contact__email_lower", "campaign__name", "campaign__account__email")
    list_select_related = ("contact", "campaign")
    raw_id_fields = ("campaign", "contact", "credential")
    show_full_result_count = False
    fields = (
        "id",
        "campaign",
        "contact",
        "status",
        "current_step",
        "next_send_at",
        "credential",
        "dispatched_at",
        "sent_at",
        "opened_at",
        "replied_at",
        "bounced_at",
        "bounce_reason",
        "unsubscribed_at",
        "completed_at",
        "stopped_at",
        "stop_reason",
        "variants",
        "send_attempts",
        "last_error",
        "created_at",
        "updated_at",
    )

    def get_search_results(self, request, queryset, search_term):
        return super().get_search_results(request, queryset, search_term.lower())

    def delete_model(self, request, obj):
        enrollments.enrollments_delete(enrollment_ids=[obj.pk])

    def delete_queryset(self, request, queryset):
        enrollments.enrollments_delete(enrollment_ids=queryset.values_list("pk", flat=True))


# --- sending engine: messages per enrollment, credential health per campaign ---
# Read-only tables rendered as fields (not inlines), so saving the editable attributes
# of these pages never needs a formset.


def _table(headers, rows) -> str:
    if not rows:
        return "none"
    head = format_html_join("", "<th>{}</th>", ((h,) for h in headers))
    body = format_html_join(
        "", "<tr>{}</tr>", ((format_html_join("", "<td>{}</td>", ((c,) for c in r)),) for r in rows)
    )
    return format_html("<table><thead><tr>{}</tr></thead><tbody>{}</tbody></table>", head, body)


@admin.display(description="Messages")
def _enrollment_messages(self, obj):
    rows = [
        (m.step, m.variant, m.sent_at, m.subject, m.to_email, m.message_id, m.credential or "-")
        for m in obj.messages.select_related("credential").order_by("step", "sent_at")
    ]
    return _table(("Step", "Variant", "Sent at", "Subject", "To", "Message-ID", "Mailbox"), rows)


@admin.display(description="Sends by campaign")
def _credential_campaign_health(self, obj):
    """The per-campaign rate auto-disable judges (after 20 sends, above the threshold)."""
    rows = [
        (
            s.campaign.name,
            s.sends,
            s.bounces,
            f"{s.bounce_rate:.1f}%",
            f"{s.campaign.bounce_threshold_percent:.1f}%",
        )
        for s in CredentialCampaignStats.objects.filter(credential=obj).select_related("campaign")
    ]
    return _table(("Campaign", "Sends", "Bounces", "Bounce rate", "Threshold"), rows)


EnrollmentAdmin.messages_sent = _enrollment_messages
EnrollmentAdmin.fields = (*EnrollmentAdmin.fields, "messages_sent")
SmtpCredentialAdmin.campaign_health = _credential_campaign_health
SmtpCredentialAdmin.fields = (*SmtpCredentialAdmin.fields, "campaign_health")
# --- end sending engine ---
