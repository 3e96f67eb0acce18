"""Back office of the conversations (outreach.admin): an account's replies with their
labels, each reply's text, and the thread of an enrollment.

A reply's body came from a stranger. It is shown as text (escaped); its sanitized HTML
only inside a sandboxed iframe whose document forbids every load (its own
Content-Security-Policy), so nothing in it runs or calls out. Staff change the label and
the read flag only, through the same service as the API (a label set here is `manual`).
"""

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from config.admin_base import ReadOnlyAdmin
from outreach.admin_base import html_table
from outreach.conversations import selectors, services
from outreach.models.conversations import Reply
from outreach.models.sending import Enrollment

# The document of the HTML preview may load nothing: no image, font, style sheet or
# frame reaches the network, and the iframe's sandbox allows no script, form or popup.
HTML_PREVIEW = (
    '<!DOCTYPE html><html><head><meta charset="utf-8">'
    '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
    "style-src 'unsafe-inline'\"></head><body>{}</body></html>"
)


def thread_url(enrollment_id) -> str:
    return reverse("admin:outreach_reply_thread", args=[enrollment_id])


@admin.register(Reply)
class ReplyAdmin(ReadOnlyAdmin, admin.ModelAdmin):
    list_display = (
        "from_email",
        "subject",
        "label",
        "read",
        "received_at",
        "campaign",
        "account_replies",
    )
    list_filter = ("label", "read", "label_source", "sender_verified")
    search_fields = ("from_email", "subject")
    list_select_related = ("campaign", "account")
    show_full_result_count = False
    fields = (
        "id",
        "account",
        "campaign",
        "enrollment",
        "contact",
        "credential",
        "thread",
        "label",
        "label_source",
        "sender_verified",
        "read",
        "returns_on",
        "from_email",
        "from_name",
        "to",
        "cc",
        "subject",
        "received_at",
        "message_id",
        "in_reply_to",
        "references",
        "new_text_shown",
        "text_shown",
        "html_shown",
        "truncated",
        "attachment_list",
        "defects",
        "size",
        "body_purged_at",
        "created_at",
        "updated_at",
    )
    editable = ("label", "read")
    can_delete = False  # replies go with their contact, or with the retention purge

    def get_queryset(self, request):
        # The change page names these four; one query instead of five.
        return (
            super()
            .get_queryset(request)
            .select_related("account", "campaign", "contact", "credential", "enrollment")
        )

    def save_model(self, request, obj, form, change):
        """Through the API's service: a label set here is `manual`, and only what the
        form changed is written."""
        changes = {name: form.cleaned_data[name] for name in form.changed_data}
        if changes:
            services.reply_update(reply=obj, **changes)

    def get_urls(self):
        thread = path(
            "thread/<uuid:enrollment_id>/",
            self.admin_site.admin_view(self.thread_view),
            name="outreach_reply_thread",
        )
        return [thread, *super().get_urls()]

    def thread_view(self, request, enrollment_id):
        """The conversation of one enrollment: its steps as sent, the contact's replies
        and the responses, oldest first (outreach.conversations.selectors)."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        enrollment = get_object_or_404(
            Enrollment.objects.select_related("campaign__account", "contact"), pk=enrollment_id
        )
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": f"Conversation with {enrollment.contact.email}",
            "enrollment": enrollment,
            "entries": selectors.enrollment_thread(enrollment=enrollment),
        }
        return TemplateResponse(request, "admin/outreach/reply/thread.html", context)

    @admin.display(description="Account", ordering="account__email")
    def account_replies(self, obj):
        """The account, linking to the list of its replies."""
        url = reverse("admin:outreach_reply_changelist") + f"?account__id__exact={obj.account_id}"
        return format_html('<a href="{}">{}</a>', url, obj.account.email)

    @admin.display(description="Conversation")
    def thread(self, obj):
        return format_html(
            '<a href="{}">The whole thread, in time order</a>', thread_url(obj.enrollment_id)
        )

    @admin.display(description="New text (without the quoted message)")
    def new_text_shown(self, obj):
        return format_html("<pre>{}</pre>", obj.new_text) if obj.new_text else "-"

    @admin.display(description="Text")
    def text_shown(self, obj):
        return format_html("<pre>{}</pre>", obj.text) if obj.text else "-"

    @admin.display(description="HTML (sanitized; shown sandboxed, nothing loads)")
    def html_shown(self, obj):
        if not obj.html:
            return "-"
        return format_html(
            '<iframe sandbox="" referrerpolicy="no-referrer" title="The reply as HTML" '
            'width="100%" height="320" srcdoc="{}"></iframe>',
            HTML_PREVIEW.format(obj.html),
        )

    @admin.display(description="Attachments (metadata only)")
    def attachment_list(self, obj):
        rows = [(a.get("filename"), a.get("content_type"), a.get("size")) for a in obj.attachments]
        return html_table(("File name", "Type", "Bytes"), rows)
