"""Analytics hours made directly, for the staff dashboard's and the admin lists' tests
(the rows the sending engine and intake keep: outreach.models.analytics)."""

from datetime import UTC, datetime, timedelta

import factory
from django.utils import timezone

from outreach.models.analytics import AnalyticsHour
from tests.accounts.factories import AccountFactory


def hours_ago(hours: int) -> datetime:
    """The start of the UTC hour `hours` before this one."""
    now = timezone.now().astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    return now - timedelta(hours=hours)


class AnalyticsHourFactory(factory.django.DjangoModelFactory):
    """An account-grain hour of real traffic this hour; pass hour=hours_ago(n), grain,
    credential, simulated and the counters."""

    class Meta:
        model = AnalyticsHour

    account = factory.SubFactory(AccountFactory)
    hour = factory.LazyFunction(lambda: hours_ago(0))
    grain = AnalyticsHour.Grain.ACCOUNT
