"""Back office: webhooks and their delivery attempts, read-only. Secrets are
never shown (the encrypted column is not even listed)."""

from django.contrib import admin, messages

from webhooks.models import DeliveryJob, Webhook, WebhookDelivery
from webhooks.operations import job_redeliver


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Webhook)
class WebhookAdmin(ReadOnlyAdmin):
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
    readonly_fields = fields
    list_select_related = ["account"]


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ReadOnlyAdmin):
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
    readonly_fields = fields
    list_select_related = ["webhook", "job"]
    actions = ["resend"]

    @admin.display(description="delivery")
    def job_state(self, obj: WebhookDelivery) -> str:
        return obj.job.state if obj.job else "pruned"

    @admin.action(description="Resend the failed deliveries of the selected attempts")
    def resend(self, request, queryset):
        jobs = {
            row.job.id: row.job
            for row in queryset.select_related("job__webhook")
            if row.job is not None
        }
        queued = sum(job_redeliver(job=job) for job in jobs.values())
        skipped = len(jobs) - queued
        self.message_user(request, f"{queued} delivery(ies) queued again.", messages.SUCCESS)
        if skipped:
            self.message_user(
                request,
                f"{skipped} skipped: not failed (still pending or succeeded) or the webhook is disabled.",
                messages.WARNING,
            )


@admin.register(DeliveryJob)
class DeliveryJobAdmin(ReadOnlyAdmin):
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
    readonly_fields = (
        "id",
        "event",
        "webhook",
        "state",
        "attempts",
        "next_attempt_at",
        "created_at",
        "finished_at",
    )
    fields = readonly_fields
    list_select_related = ["webhook"]
