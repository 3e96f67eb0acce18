"""The webhooks' state for GET /metrics, read at scrape time (config/metrics_scrape.py;
docs/metrics.md): unfinished deliveries by state, how far the due ones are behind, and
the disabled webhooks. Registered in WebhooksConfig.ready."""

from collections.abc import Iterator

from django.db.models import Count, Min, Q
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily, Metric

from config.metrics_scrape import age_seconds
from webhooks.models import DeliveryJob, Webhook


def webhook_state_read() -> Iterator[Metric]:
    now = timezone.now()
    # One pass over the drains' partial index (deliveryjob_webhook_due_idx): the active jobs.
    jobs = DeliveryJob.objects.filter(state__in=DeliveryJob.ACTIVE_STATES).aggregate(
        pending=Count("pk", filter=Q(state=DeliveryJob.State.PENDING)),
        delivering=Count("pk", filter=Q(state=DeliveryJob.State.DELIVERING)),
        due=Count("pk", filter=Q(next_attempt_at__lte=now)),
        oldest=Min("next_attempt_at"),
    )
    family = GaugeMetricFamily(
        "outreach_webhook_jobs",
        "Webhook deliveries not finished, by state (pending: waiting for its first attempt "
        "or a retry; delivering: a request in flight).",
        labels=["state"],
    )
    family.add_metric(["pending"], jobs["pending"])
    family.add_metric(["delivering"], jobs["delivering"])
    yield family
    family = GaugeMetricFamily(
        "outreach_webhook_jobs_due", "Unfinished webhook deliveries whose next attempt is due now."
    )
    family.add_metric([], jobs["due"])
    yield family
    family = GaugeMetricFamily(
        "outreach_webhook_jobs_oldest_due_seconds",
        "How long the longest-waiting unfinished webhook delivery has been due (0 when none is).",
    )
    family.add_metric([], age_seconds(jobs["oldest"], now))
    yield family
    family = GaugeMetricFamily(
        "outreach_webhooks_disabled",
        "Webhooks disabled (after 5 failed deliveries in a row, or by their account).",
    )
    family.add_metric([], Webhook.objects.filter(disabled_at__isnull=False).count())
    yield family
