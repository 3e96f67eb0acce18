"""Billing reads."""

from billing.models import UsageRecord

USAGE_HISTORY_LENGTH = 12


def usage_history(*, account, before: UsageRecord) -> list[UsageRecord]:
    """The account's last 12 records before the current one, newest first.

    The current period is not part of the history: GET /billing/usage reports
    it as `current`.
    """
    return list(
        UsageRecord.objects.filter(account=account, period_start__lt=before.period_start)
        .exclude(pk=before.pk)
        .order_by("-period_start")[:USAGE_HISTORY_LENGTH]
    )
