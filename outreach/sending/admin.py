"""Back office of the send state (outreach.admin): enrollments, their messages and their
SMTP attempts."""

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html

from config.admin_base import ReadOnlyAdmin
from outreach import enrollments
from outreach.admin_base import html_table
from outreach.models.sending import Enrollment, SendClaim


@admin.register(Enrollment)
class EnrollmentAdmin(ReadOnlyAdmin, admin.ModelAdmin):
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
        "clicked_at",
        "replied_at",
        "bounced_at",
        "bounce_reason",
        "bounce_type",
        "bounce_category",
        "unsubscribed_at",
        "completed_at",
        "stopped_at",
        "stop_reason",
        "variants",
        "send_attempts",
        "last_error",
        "created_at",
        "updated_at",
        "messages_sent",
        "send_attempts_made",
        "conversation",
    )

    def get_search_results(self, request, queryset, search_term):
        return super().get_search_results(request, queryset, search_term.lower())

    def delete_model(self, request, obj):
        enrollments.enrollments_delete(enrollment_ids=[obj.pk])

    def delete_queryset(self, request, queryset):
        enrollments.enrollments_delete(enrollment_ids=queryset.values_list("pk", flat=True))

    @admin.display(description="Conversation")
    def conversation(self, obj):
        """The thread view of the conversations' admin: steps, replies, responses."""
        url = reverse("admin:outreach_reply_thread", args=[obj.pk])
        return format_html('<a href="{}">Steps, replies and responses in time order</a>', url)

    @admin.display(description="Messages")
    def messages_sent(self, obj):
        rows = [
            (m.step, m.variant, m.sent_at, m.subject, m.to_email, m.message_id, m.credential or "-")
            for m in obj.messages.select_related("credential").order_by("step", "sent_at")
        ]
        return html_table(
            ("Step", "Variant", "Sent at", "Subject", "To", "Message-ID", "Mailbox"), rows
        )

    @admin.display(description="SMTP attempts")
    def send_attempts_made(self, obj):
        """Every finished attempt of every step, oldest first (docs/sending.md, "Attempts")."""
        rows = [
            (
                a.step,
                a.sending_at or "-",
                a.finished_at,
                a.credential or "-",
                a.outcome,
                a.reply_code or "-",
                a.reply_text or "-",
                "-" if a.duration_ms is None else f"{a.duration_ms} ms",
                "unknown" if a.outcome_unknown else "",
            )
            for a in SendClaim.objects.filter(enrollment=obj, finished_at__isnull=False)
            .select_related("credential")
            .order_by("finished_at", "pk")
        ]
        return html_table(ATTEMPT_HEADERS, rows)


ATTEMPT_HEADERS = (
    "Step",
    "Started",
    "Finished",
    "Mailbox",
    "Outcome",
    "Code",
    "Reply or error",
    "Duration",
    "",
)
