"""`client.analytics.get(...)` against the live service: the series typed (dates as
`date`, the bounces by type), its filters and range sent as the API names them, and the
API's refusals as the SDK's exceptions."""

from datetime import date, datetime

import pytest
from outreach_sdk import Client, errors, models

from outreach.analytics import Hit, hits_add
from tests.accounts.factories import AccountFactory
from tests.intake.factories import sent_enrollment

pytestmark = [pytest.mark.e2e]


@pytest.fixture
def client(service_url, sdk_key) -> Client:
    return Client(api_key=sdk_key, base_url=service_url)


def _counted(enrollment, counter: str, *days: str) -> None:
    hits_add(
        [Hit(counter, enrollment.pk, datetime.fromisoformat(f"{d}T12:00+00:00")) for d in days]
    )


def test_the_series_comes_back_typed(client, sdk_account):
    enrollment = sent_enrollment(account=sdk_account)
    _counted(enrollment, "sent", "2026-03-02", "2026-03-04", "2026-03-04")
    _counted(enrollment, "bounced_block", "2026-03-04")

    days = client.analytics.get(from_date=date(2026, 3, 2), to_date="2026-03-04")

    assert isinstance(days, models.Analytics)
    assert (days.interval, days.timezone) == ("day", "UTC")
    assert [(row.date, row.sent) for row in days.series] == [
        (date(2026, 3, 2), 1),
        (date(2026, 3, 3), 0),
        (date(2026, 3, 4), 2),
    ]
    assert isinstance(days.series[0], models.AnalyticsRow)
    assert days.totals.sent == 3
    assert days.totals.bounced == {"hard": 0, "soft": 0, "block": 1}
    weeks = client.analytics.get(
        from_date="2026-03-02",
        to_date="2026-03-15",
        interval="week",
        timezone="America/New_York",
        campaign_id=str(enrollment.campaign_id),
    )
    assert [(row.date, row.sent) for row in weeks.series] == [
        (date(2026, 3, 2), 3),
        (date(2026, 3, 9), 0),
    ]
    assert weeks.timezone == "America/New_York"


def test_refusals_are_the_sdks_exceptions(client):
    with pytest.raises(errors.ValidationFailed) as refused:
        client.analytics.get(from_date="2025-01-01", to_date="2026-03-01")
    assert list(refused.value.details["fields"]) == ["to"]
    with pytest.raises(errors.ValidationFailed) as refused:
        client.analytics.get(timezone="Moon/Base")
    assert list(refused.value.details["fields"]) == ["timezone"]
    theirs = sent_enrollment(account=AccountFactory())
    with pytest.raises(errors.CampaignNotFound):
        client.analytics.get(campaign_id=str(theirs.campaign_id))
