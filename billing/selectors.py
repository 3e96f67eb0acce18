"""Billing reads."""

from typing import TYPE_CHECKING

from billing.models import UsageRecord

if TYPE_CHECKING:
    from accounts.models import Account

USAGE_HISTORY_LENGTH = 12


def usage_history(*, account: "Account", before: UsageRecord) -> list[UsageRecord]:
    """The account's last 12 records before the current one, newest first.

    The current period is not part of the history: GET /billing/usage reports
    it as `current`.
    """
    return list(
        UsageRecord.objects.filter(account=account, period_start__lt=before.period_start)
        .exclude(pk=before.pk)
        .order_by("-period_start")[:USAGE_HISTORY_LENGTH]
    )
