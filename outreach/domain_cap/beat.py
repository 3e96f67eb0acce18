"""Beat task of the recipient domain cap: the purge of past days' counts."""

from celery import shared_task
from django.utils import timezone

from outreach.domain_cap.counts import counts_purge
from outreach.mailboxes.pace import utc_day


@shared_task(name="outreach.tasks.recipient_domain_counts_purge")
def recipient_domain_counts_purge_task() -> int:
    """Beat, hourly: delete the per-domain send counts of past days."""
    return counts_purge(today=utc_day(timezone.now()))
