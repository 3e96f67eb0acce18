"""Billing period boundaries: the Stripe subscription's when one is active,
calendar months in UTC otherwise."""

from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from accounts.models import Account

# Subscription statuses during which the provider's period is the billing period.
ACTIVE_SUBSCRIPTION_STATUSES = frozenset({"active", "trialing", "past_due"})


def calendar_month(at: datetime) -> tuple[datetime, datetime]:
    at = at.astimezone(UTC)
    start = datetime(at.year, at.month, 1, tzinfo=UTC)
    end = datetime(at.year + (at.month == 12), at.month % 12 + 1, 1, tzinfo=UTC)
    return start, end


def period_bounds(account: "Account", at: datetime) -> tuple[datetime, datetime]:
    start, end = account.psp_current_period_start, account.psp_current_period_end
    if (
        account.psp_subscription_id
        and account.psp_subscription_status in ACTIVE_SUBSCRIPTION_STATUSES
        and start is not None
        and end is not None
        and start <= at < end
    ):
        return start, end
    return calendar_month(at)
