"""Outreach's state for GET /metrics, read at scrape time (config/metrics_scrape.py;
docs/metrics.md): the due backlog, mailboxes that cannot send, contact imports under way.
Registered in OutreachConfig.ready."""

from collections.abc import Iterator

from django.db.models import Count, Min, Q
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily, Metric

from config.metrics_scrape import age_seconds
from outreach.models.contacts import ContactImport
from outreach.models.mailboxes import SmtpCredential
from outreach.models.reputation import ProviderPause, RecipientProvider
from outreach.models.sending import Enrollment


def outreach_state_read() -> Iterator[Metric]:
    # Long: one scrape's reads, a gauge family each, in the order docs/metrics.md lists them.
    now = timezone.now()
    # The scheduler's partial index (enrollment_due_idx) answers both; an enrollment in
    # flight (an open claim) keeps its next_send_at but is handed to a sender already.
    due = (
        Enrollment.objects.not_in_flight()
        .filter(status__in=Enrollment.DUE_STATUSES, next_send_at__lte=now)
        .aggregate(count=Count("pk"), oldest=Min("next_send_at"))
    )
    family = GaugeMetricFamily(
        "outreach_send_backlog",
        "Enrollments whose next step is due now and not yet handed to a sender (those "
        "waiting for a paced mailbox included).",
    )
    family.add_metric([], due["count"])
    yield family
    family = GaugeMetricFamily(
        "outreach_send_backlog_oldest_seconds",
        "How long the longest-waiting due step has been due (0 when none is).",
    )
    family.add_metric([], age_seconds(due["oldest"], now))
    yield family

    mailboxes = SmtpCredential.objects.aggregate(
        disabled=Count("pk", filter=Q(disabled_at__isnull=False)),
        paused=Count("pk", filter=Q(disabled_at__isnull=True, paused_at__isnull=False)),
        reauthorization=Count(
            "pk",
            filter=Q(
                disabled_at__isnull=True,
                oauth_status=SmtpCredential.OAuthStatus.REAUTHORIZATION_REQUIRED,
            ),
        ),
    )
    family = GaugeMetricFamily(
        "outreach_mailboxes_unavailable",
        "Mailboxes that cannot send, by state (disabled; reauthorization_required: an OAuth "
        "mailbox whose provider refused its refresh token; paused: by the complaint guard).",
        labels=["state"],
    )
    family.add_metric(["disabled"], mailboxes["disabled"])
    family.add_metric(["reauthorization_required"], mailboxes["reauthorization"])
    family.add_metric(["paused"], mailboxes["paused"])
    yield family

    yield from _provider_pauses_read(now)

    unfinished = (ContactImport.Status.PENDING, ContactImport.Status.PROCESSING)
    counts = dict(
        ContactImport.objects.filter(status__in=unfinished)
        .values_list("status")
        .annotate(n=Count("pk"))
        .values_list("status", "n")
    )
    family = GaugeMetricFamily(
        "outreach_contact_imports",
        "Contact imports not finished, by status (pending, processing).",
        labels=["status"],
    )
    for status in unfinished:
        family.add_metric([status.value], counts.get(status, 0))
    yield family


def _provider_pauses_read(now) -> Iterator[Metric]:
    """The circuit breaker's pairs paused now (providerpause_until_idx), by provider."""
    paused = dict(
        ProviderPause.objects.filter(until__gt=now)
        .values_list("provider")
        .annotate(n=Count("pk"))
        .values_list("provider", "n")
    )
    family = GaugeMetricFamily(
        "outreach_mailbox_provider_pauses",
        "Mailbox and recipient provider pairs the circuit breaker pauses now, by provider.",
        labels=["provider"],
    )
    for provider in RecipientProvider.values:
        family.add_metric([provider], paused.get(provider, 0))
    yield family
