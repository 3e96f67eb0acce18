"""Periodic work of analytics: beat's fold of past hours' shards (outreach.analytics.fold)."""

from datetime import timedelta

from celery import shared_task
from django.utils import timezone

from outreach.analytics.fold import hours_fold


@shared_task(name="outreach.tasks.analytics_fold", ignore_result=True)
def analytics_fold() -> int:
    """Beat (ANALYTICS_FOLD_INTERVAL_SECONDS): the shards of the hours that ended more
    than an hour ago, folded (sends recorded late still land in the last hour). Returns
    the rows folded."""
    hour = timezone.now().replace(minute=0, second=0, microsecond=0)
    return hours_fold(before=hour - timedelta(hours=1))
