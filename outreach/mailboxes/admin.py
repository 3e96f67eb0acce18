"""Back office of the mailboxes (outreach.admin): health first, secrets never shown."""

from django.contrib import admin
from django.utils import timezone
from django.utils.html import format_html
from django.utils.text import Truncator

from config.admin_base import ReadOnlyAdmin
from outreach.admin_base import html_table
from outreach.mailboxes.selectors import credentials_with_answers
from outreach.mailboxes.services import credential_update
from outreach.models.mailboxes import SmtpCredential
from outreach.models.reputation import ProviderPause
from outreach.models.sending import CredentialCampaignStats, SendClaim

# The mailbox page lists this many of its latest SMTP attempts.
ATTEMPTS_SHOWN = 50
# The list's address columns are cut to this many characters (the whole address in the
# tooltip), so the list fits a 1280 px window.
LIST_TEXT_CHARS = 28


def _cut(text: str) -> str:
    return format_html('<span title="{}">{}</span>', text, Truncator(text).chars(LIST_TEXT_CHARS))


@admin.register(SmtpCredential)
class SmtpCredentialAdmin(ReadOnlyAdmin, admin.ModelAdmin):
    # Health first: a narrow window still shows which mailboxes are disabled or failing.
    # Then its numbers (opened and replied in the list's one query:
    # credentials_with_answers); its settings are on its page. Fits 1280 px: the account
    # is under the address, long addresses are cut, why it is disabled or paused is one
    # column.
    list_display = (
        "from_shown",
        "disabled_at",
        "last_error_at",
        "stopped_because",
        "bounce_rate",
        "sent",
        "opened_total",
        "replied_total",
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
        "imap_authserv_id",
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
        "pace",
        "next_send_earliest_at",
        "sent_count",
        "bounced_count",
        "bounce_rate",
        "disabled_at",
        "disabled_reason",
        "paused_at",
        "paused_reason",
        "ramp_up",
        "ramp_started_on",
        "last_error",
        "last_error_at",
        "created_at",
        "campaign_health",
        "provider_pauses",
        "latest_attempts",
    )
    editable = ("daily_limit", "from_name", "min_interval_seconds", "max_interval_seconds")

    def get_queryset(self, request):
        return credentials_with_answers(super().get_queryset(request))

    @admin.display(description="From (account)", ordering="from_email")
    def from_shown(self, obj):
        """The address, its account's under it: one column less at 1280 px."""
        return format_html("{}<br><small>{}</small>", _cut(obj.from_email), _cut(obj.account.email))

    @admin.display(description="Stop reason", ordering="disabled_reason")
    def stopped_because(self, obj):
        """Why the mailbox gets no claim: its disabled reason, else its pause's (the
        complaint guard; docs/deliverability.md)."""
        if obj.disabled_reason:
            return obj.get_disabled_reason_display()
        if obj.paused_reason:
            return f"paused: {obj.get_paused_reason_display()}"
        return "-"

    @admin.display(description="Sent", ordering="sent_count")
    def sent(self, obj):
        return obj.sent_count

    @admin.display(description="Opened", ordering="opened_total")
    def opened_total(self, obj):
        return obj.opened_total

    @admin.display(description="Replied", ordering="replied_total")
    def replied_total(self, obj):
        return obj.replied_total

    def save_model(self, request, obj, form, change):
        """A staff edit goes through the API's update (outreach.mailboxes.services): the
        fields changed, written on the row as it is now (the engine's counters, pace and
        reservations moved since the page was read), the pace rebased as a PATCH's is."""
        if not change:
            super().save_model(request, obj, form, change)
            return
        data = {name: form.cleaned_data[name] for name in form.changed_data}
        credential_update(credential=obj, data=data)

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

    @admin.display(description="Sends by campaign")
    def campaign_health(self, obj):
        """The per-campaign rate auto-disable judges (after 20 sends, above the threshold)."""
        rows = [
            (
                s.campaign.name,
                s.sends,
                s.bounces,
                f"{s.bounce_rate:.1f}%",
                f"{s.campaign.bounce_threshold_percent:.1f}%",
            )
            for s in CredentialCampaignStats.objects.filter(credential=obj).select_related(
                "campaign"
            )
        ]
        return html_table(("Campaign", "Sends", "Bounces", "Bounce rate", "Threshold"), rows)

    @admin.display(description="Provider pauses (circuit breaker)")
    def provider_pauses(self, obj):
        """Each recipient provider the mailbox was ever paused toward: its latest pause,
        whether in force, and the doubling's level (docs/deliverability.md)."""
        now = timezone.now()
        rows = [
            (
                p.provider,
                "in force" if p.until > now else "ended",
                p.paused_at,
                p.until,
                p.level,
                p.reason,
                p.detail or "-",
            )
            for p in ProviderPause.objects.filter(credential=obj).order_by("provider")
        ]
        headers = ("Provider", "State", "Paused at", "Until", "Level", "Reason", "Server said")
        return html_table(headers, rows)

    @admin.display(description=f"Latest {ATTEMPTS_SHOWN} SMTP attempts")
    def latest_attempts(self, obj):
        """The mailbox's latest finished attempts, newest first (docs/sending.md,
        "Attempts"): one indexed read, bounded."""
        rows = [
            (
                a.finished_at,
                a.enrollment_id,
                a.step,
                a.outcome,
                a.reply_code or "-",
                a.reply_text or "-",
                "-" if a.duration_ms is None else f"{a.duration_ms} ms",
                "unknown" if a.outcome_unknown else "",
            )
            for a in SendClaim.objects.filter(credential=obj, finished_at__isnull=False).order_by(
                "-claimed_at", "-pk"
            )[:ATTEMPTS_SHOWN]
        ]
        headers = ("Finished", "Enrollment", "Step", "Outcome", "Code", "Reply or error")
        return html_table((*headers, "Duration", ""), rows)
