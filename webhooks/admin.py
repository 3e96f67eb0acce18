"""Back office: webhooks and their delivery attempts, read-only. Secrets are
never shown (the encrypted column is not even listed)."""

from datetime import timedelta

from django.contrib import admin, messages
from django.utils import timezone

from config.admin_base import ReadOnlyAdmin
from config.api.errors import ServiceError
from webhooks.models import DeliveryJob, Webhook, WebhookDelivery
from webhooks.operations import FINISHED_STATES, job_redeliver, webhook_replay, webhook_test_send

# The admin's replay action: what failed in this last window.
ADMIN_REPLAY_WINDOW = timedelta(hours=24)


@admin.register(Webhook)
class WebhookAdmin(ReadOnlyAdmin, admin.ModelAdmin):
    list_display = [
        "url",
        "disabled_at",
        "consecutive_failures",
        "account",
        "event_filters",
        "created_at",
    ]
    list_filter = [("disabled_at", admin.EmptyFieldListFilter)]
    search_fields = ["url", "account__email", "id"]
    fields = (
        "id",
        "account",
        "url",
        "event_filters",
        "consecutive_failures",
        "disabled_at",
        "created_at",
    )
    can_change = False
    can_delete = False
    list_select_related = ["account"]
    actions = ["send_test", "replay_failed"]

    @admin.action(description="Send a test event (enrollment.sent) to the selected webhooks")
    def send_test(self, request, queryset):
        for webhook in queryset:
            webhook_test_send(webhook=webhook, event_type="enrollment.sent")
            self.message_user(
                request,
                f"{webhook.url}: a test event is on its way; its outcome shows among the "
                "webhook's delivery attempts.",
                messages.SUCCESS,
            )

    @admin.action(description="Replay the deliveries that failed in the last 24 hours")
    def replay_failed(self, request, queryset):
        since = timezone.now() - ADMIN_REPLAY_WINDOW
        for webhook in queryset:
            try:
                replayed = webhook_replay(webhook=webhook, since=since)
            except ServiceError as error:
                self.message_user(request, f"{webhook.url}: {error.message}", messages.WARNING)
                continue
            more = " (more remain: run it again)" if replayed.has_more else ""
            self.message_user(
                request,
                f"{webhook.url}: {replayed.replayed} delivery(ies) queued again{more}.",
                messages.SUCCESS,
            )


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ReadOnlyAdmin, admin.ModelAdmin):
    # Health first: a narrow window still shows which attempts failed and why.
    list_display = [
        "created_at",
        "delivered_at",
        "status_code",
        "error",
        "event_type",
        "attempt",
        "webhook",
        "job_state",
    ]
    list_filter = ["event_type", ("delivered_at", admin.EmptyFieldListFilter)]
    search_fields = ["webhook__url", "webhook__id", "job__id"]
    fields = (
        "id",
        "webhook",
        "job",
        "event_type",
        "attempt",
        "status_code",
        "error",
        "response_excerpt",
        "duration_ms",
        "delivered_at",
        "created_at",
    )
    can_change = False
    can_delete = False
    list_select_related = ["webhook", "job"]
    actions = ["resend"]

    @admin.display(description="delivery")
    def job_state(self, obj: WebhookDelivery) -> str:
        return obj.job.state if obj.job else "pruned"

    @admin.action(description="Deliver the events of the selected attempts again")
    def resend(self, request, queryset):
        jobs = {
            row.job.id: row.job
            for row in queryset.select_related("job__webhook")
            if row.job is not None
        }
        queued = sum(job_redeliver(job=job, states=FINISHED_STATES) for job in jobs.values())
        skipped = len(jobs) - queued
        self.message_user(request, f"{queued} delivery(ies) queued again.", messages.SUCCESS)
        if skipped:
            self.message_user(
                request,
                f"{skipped} skipped: still under way, or the webhook is disabled.",
                messages.WARNING,
            )


@admin.register(DeliveryJob)
class DeliveryJobAdmin(ReadOnlyAdmin, admin.ModelAdmin):
    list_display = [
        "id",
        "webhook",
        "state",
        "attempts",
        "next_attempt_at",
        "created_at",
        "finished_at",
    ]
    list_filter = ["state"]
    search_fields = ["id", "webhook__url"]
    fields = (
        "id",
        "event",
        "webhook",
        "state",
        "attempts",
        "next_attempt_at",
        "created_at",
        "finished_at",
    )
    can_change = False
    can_delete = False
    list_select_related = ["webhook"]
