"""GET /analytics (API.md 21, docs/analytics.md): a dense series of local dates, days
across DST changes, weeks from their Monday, months from their first day, zones whose
offset is not whole hours, isolation, every 422, and its one query. The counters are
written by the real write function (outreach.analytics.hits_add) for a sent message; and
beat's move of past hours into their days changes no series, in any zone or interval."""

from datetime import UTC, date, datetime, timedelta

import pytest
from django.utils import timezone

from outreach.analytics import Hit, hits_add
from outreach.analytics.fold import hours_fold
from outreach.models.analytics import AnalyticsDay, AnalyticsHour
from tests.conversations.factories import SentMessageFactory
from tests.outreach.factories import CampaignFactory, CredentialFactory
from tests.outreach.helpers import assert_error, assert_fields

pytestmark = pytest.mark.django_db


@pytest.fixture
def message(account):
    campaign = CampaignFactory(account=account, with_steps=1)
    return SentMessageFactory(
        enrollment__campaign=campaign,
        enrollment__contact__account=account,
        step_key=campaign.steps.get().key,
    )


def _sent(message, *instants: str) -> None:
    """A send counted at each instant (ISO 8601, UTC)."""
    hits_add(
        [
            Hit("sent", message.enrollment_id, datetime.fromisoformat(at).replace(tzinfo=UTC))
            for at in instants
        ]
    )


def _series(client, **query) -> dict[str, int]:
    answer = client.get("/analytics", query)
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["interval"] == query.get("interval", "day")
    assert body["timezone"] == query.get("timezone", "UTC")
    assert body["totals"]["sent"] == sum(row["sent"] for row in body["series"])
    return {row["date"]: row["sent"] for row in body["series"]}


def test_the_default_is_the_30_days_to_today_with_every_date(api_client):
    answer = api_client.get("/analytics")
    assert answer.status_code == 200
    body = answer.json()
    today = timezone.now().date()
    assert [row["date"] for row in body["series"]] == [
        (today - timedelta(days=29 - n)).isoformat() for n in range(30)
    ]
    zero = {
        "sent": 0,
        "opened": 0,
        "clicked": 0,
        "replied": 0,
        "positive_replies": 0,
        "bounced": {"hard": 0, "soft": 0, "block": 0},
        "unsubscribed": 0,
        "complaints": 0,
        "responses": 0,
    }
    assert body["series"][0] == {"date": body["series"][0]["date"], **zero}
    assert body["totals"] == zero


def test_days_are_local_across_the_spring_and_autumn_changes(api_client, message):
    _sent(
        message,
        "2026-03-28T22:59",  # 23:59 in Paris, the 28th
        "2026-03-28T23:30",  # 00:30 on the 29th, which has 23 hours
        "2026-03-29T21:59",  # 23:59 CEST, still the 29th
        "2026-03-29T22:00",  # 00:00 on the 30th
        "2026-10-25T00:30",  # 02:30 CEST on the 25th, which has 25 hours
        "2026-10-25T01:30",  # 02:30 CET, the same day again
        "2026-10-25T22:59",  # 23:59 CET
        "2026-10-25T23:00",  # 00:00 on the 26th
    )
    paris = {"timezone": "Europe/Paris"}
    spring = _series(api_client, **{"from": "2026-03-28", "to": "2026-03-30"}, **paris)
    assert spring == {"2026-03-28": 1, "2026-03-29": 2, "2026-03-30": 1}
    autumn = _series(api_client, **{"from": "2026-10-24", "to": "2026-10-26"}, **paris)
    assert autumn == {"2026-10-24": 0, "2026-10-25": 3, "2026-10-26": 1}
    utc = _series(api_client, **{"from": "2026-10-25", "to": "2026-10-25"})
    assert utc == {"2026-10-25": 4}


def test_a_half_hour_zone_is_approximated_to_the_hour(api_client, message):
    # Kolkata is UTC+05:30: 18:10 UTC is 23:40 there, 18:40 UTC is 00:10 the next day,
    # but both are in the hour that starts at 23:30 local: counted on the first day.
    _sent(message, "2026-05-04T18:10", "2026-05-04T18:40", "2026-05-04T18:30")
    kolkata = _series(
        api_client, **{"from": "2026-05-04", "to": "2026-05-05", "timezone": "Asia/Kolkata"}
    )
    assert kolkata == {"2026-05-04": 3, "2026-05-05": 0}


def test_weeks_carry_their_monday_and_count_only_the_dates_asked(api_client, message):
    _sent(message, "2026-03-03T09:00", "2026-03-04T09:00", "2026-03-15T23:00", "2026-03-21T01:00")
    weeks = _series(api_client, **{"from": "2026-03-04", "to": "2026-03-20", "interval": "week"})
    # The 3rd is before `from`, the 21st after `to`.
    assert weeks == {"2026-03-02": 1, "2026-03-09": 1, "2026-03-16": 0}


def test_months_carry_their_first_day(api_client, message):
    _sent(message, "2026-01-20T12:00", "2026-01-31T23:30", "2026-03-01T00:00")
    months = _series(api_client, **{"from": "2026-01-15", "to": "2026-03-10", "interval": "month"})
    assert months == {"2026-01-01": 2, "2026-02-01": 0, "2026-03-01": 1}
    # In Tokyo (UTC+9) the 31st's 23:30 UTC is already February.
    tokyo = _series(
        api_client,
        **{"from": "2026-01-15", "to": "2026-03-10", "interval": "month", "timezone": "Asia/Tokyo"},
    )
    assert tokyo == {"2026-01-01": 1, "2026-02-01": 1, "2026-03-01": 1}


def test_a_year_and_a_day_of_dates_is_the_longest_range(api_client, message):
    _sent(message, "2025-03-02T10:00", "2026-03-02T10:00")
    year = _series(api_client, **{"from": "2025-03-02", "to": "2026-03-02"})
    assert len(year) == 366 and year["2025-03-02"] == year["2026-03-02"] == 1
    longer = api_client.get("/analytics", {"from": "2025-03-01", "to": "2026-03-02"})
    assert_fields(longer, "to")


def test_from_alone_runs_to_today(api_client):
    start = timezone.now().date() - timedelta(days=3)
    dates = _series(api_client, **{"from": start.isoformat()})
    assert list(dates) == [(start + timedelta(days=n)).isoformat() for n in range(4)]
    old = date(2020, 1, 1)
    dates = _series(api_client, **{"from": old.isoformat()})  # at most a year from it
    assert list(dates)[-1] == "2020-12-31" and len(dates) == 366


def test_filters_read_their_own_grain(api_client, account, message):
    _sent(message, "2026-03-02T10:00")
    other_campaign = CampaignFactory(account=account, with_steps=1)
    other = SentMessageFactory(
        enrollment__campaign=other_campaign, enrollment__contact__account=account
    )
    _sent(other, "2026-03-02T11:00", "2026-03-02T12:00")
    day = {"from": "2026-03-02", "to": "2026-03-02"}
    campaign = message.enrollment.campaign
    step = campaign.steps.get().key
    assert _series(api_client, **day) == {"2026-03-02": 3}
    assert _series(api_client, campaign_id=str(campaign.pk), **day) == {"2026-03-02": 1}
    assert _series(api_client, campaign_id=str(campaign.pk), step_key=step, **day) == {
        "2026-03-02": 1
    }
    mailbox = str(other.credential_id)
    assert _series(api_client, credential_id=mailbox, **day) == {"2026-03-02": 2}


def test_another_accounts_ids_are_not_found_and_its_counts_unseen(
    api_client, other_client, message
):
    _sent(message, "2026-03-02T10:00")
    day = {"from": "2026-03-02", "to": "2026-03-02"}
    campaign = message.enrollment.campaign
    assert _series(other_client, **day) == {"2026-03-02": 0}
    answer = other_client.get("/analytics", {"campaign_id": str(campaign.pk), **day})
    assert_error(answer, 404, "campaign_not_found")
    answer = other_client.get("/analytics", {"credential_id": str(message.credential_id)})
    assert_error(answer, 404, "credential_not_found")
    unknown = api_client.get("/analytics", {"campaign_id": "8c0e1f5e-0000-4000-8000-000000000000"})
    assert_error(unknown, 404, "campaign_not_found")


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"form": "2026-03-01"}, "form"),
        ({"limit": "10"}, "limit"),
        ({"from": "2026-03-01T00:00"}, "from"),
        ({"from": "yesterday"}, "from"),
        ({"to": "2026-02-30"}, "to"),
        ({"to": ""}, "to"),
        ({"from": ""}, "from"),
        ({"interval": ""}, "interval"),
        ({"campaign_id": ""}, "campaign_id"),
        ({"from": "2026-03-02", "to": "2026-03-01"}, "to"),
        ({"interval": "hour"}, "interval"),
        ({"timezone": "Mars/Olympus"}, "timezone"),
        ({"timezone": "+02:00"}, "timezone"),
        ({"campaign_id": "42"}, "campaign_id"),
        ({"credential_id": "not-an-id"}, "credential_id"),
        ({"step_key": "s1"}, "step_key"),
    ],
)
def test_a_malformed_or_unknown_parameter_is_named(api_client, query, field):
    assert_fields(api_client.get("/analytics", query), field)


def test_a_step_key_the_campaign_lacks_and_two_grains_at_once_are_refused(api_client, message):
    campaign = str(message.enrollment.campaign_id)
    answer = api_client.get("/analytics", {"campaign_id": campaign, "step_key": "nope"})
    assert_fields(answer, "step_key")
    mailbox = str(message.credential_id)
    answer = api_client.get("/analytics", {"campaign_id": campaign, "credential_id": mailbox})
    assert_fields(answer, "credential_id")


def test_one_query_answers_a_year(api_client, message, django_assert_num_queries, auth_queries):
    _sent(message, *(f"2025-{m:02d}-15T10:00" for m in range(4, 13)))
    year = {"from": "2025-03-03", "to": "2026-03-02"}
    with django_assert_num_queries(auth_queries + 1):
        assert sum(_series(api_client, **year).values()) == 9
    campaign = str(message.enrollment.campaign_id)
    step = message.enrollment.campaign.steps.get().key
    with django_assert_num_queries(auth_queries + 2):  # the campaign and its step checked
        assert sum(_series(api_client, campaign_id=campaign, step_key=step, **year).values()) == 9
    mailbox = str(CredentialFactory(account=message.account).pk)
    with django_assert_num_queries(auth_queries + 2):
        assert sum(_series(api_client, credential_id=mailbox, **year).values()) == 0


def test_the_fold_moves_past_hours_into_their_days_and_leaves_the_same_series(
    api_client, message, settings
):
    settings.COUNTER_SHARDS = 8
    for at in ["2026-03-02T10:15"] * 40 + ["2026-03-02T11:20"] * 3:
        _sent(message, at)  # a statement each, a shard each
    rows = AnalyticsHour.objects.filter(grain="account")
    assert rows.filter(hour__hour=10).count() > 1  # 40 writes over 8 shards
    day = {"from": "2026-03-02", "to": "2026-03-02"}
    before = _series(api_client, **day)

    folded = hours_fold(before=datetime(2026, 3, 2, 11, tzinfo=UTC), batch=7)

    assert folded > 0
    assert not rows.filter(hour__hour=10).exists()
    assert sum(rows.filter(hour__hour=11).values_list("sent", flat=True)) == 3  # not moved
    assert _series(api_client, **day) == before == {"2026-03-02": 43}
    # Every grain of the moved hour is one day row: its running sums through the hours.
    days = AnalyticsDay.objects.filter(day=date(2026, 3, 2))
    assert sorted(days.values_list("grain", flat=True)) == [
        "account",
        "campaign",
        "credential",
        "step",
    ]
    assert {tuple(sent) for sent in days.values_list("sent", flat=True)} == {(0,) * 10 + (40,) * 14}
    assert hours_fold(before=datetime(2026, 3, 2, 11, tzinfo=UTC)) == 0  # nothing left
    # The next hour joins the same day; a late event makes an hour row again, moved next.
    hours_fold(before=datetime(2026, 3, 3, tzinfo=UTC))
    _sent(message, "2026-03-02T09:05")
    assert _series(api_client, **day) == {"2026-03-02": 44}
    hours_fold(before=datetime(2026, 3, 3, tzinfo=UTC))
    assert not AnalyticsHour.objects.exists()
    sent = days.get(grain="account").sent
    assert sent == [0] * 9 + [1] + [41] + [44] * 13
    assert _series(api_client, **day) == {"2026-03-02": 44}


ZONES = ["UTC", "Europe/London", "America/New_York", "Asia/Kolkata", "Pacific/Chatham"]


def test_every_zone_and_interval_reads_the_same_series_from_hours_as_from_days(api_client, message):
    # Sends every 7 h 13 min from mid-March to mid-May 2026: both DST changes of London
    # and New York, month and week edges, hours at every position of a UTC day.
    first = datetime(2026, 3, 14, 0, 7, tzinfo=UTC)
    _sent(message, *[(first + n * timedelta(minutes=433)).isoformat()[:16] for n in range(200)])
    queries = [
        {"from": "2026-03-15", "to": "2026-05-10", "interval": interval, "timezone": zone}
        for zone in ZONES
        for interval in ("day", "week", "month")
    ]
    hours = [_series(api_client, **query) for query in queries]
    assert all(sum(series.values()) > 150 for series in hours)

    hours_fold(before=datetime(2026, 4, 9, 13, tzinfo=UTC))  # into the middle of a day
    assert [_series(api_client, **query) for query in queries] == hours
    hours_fold(before=datetime(2026, 6, 1, tzinfo=UTC))
    assert not AnalyticsHour.objects.exists()
    assert [_series(api_client, **query) for query in queries] == hours


def _both(client, before: str, **query) -> dict[str, int]:
    """The series read from the hour rows, then (equal) from the day rows once beat's
    fold has moved every hour before `before` (ISO 8601, UTC)."""
    hours = _series(client, **query)
    hours_fold(before=datetime.fromisoformat(before).replace(tzinfo=UTC))
    assert not AnalyticsHour.objects.exists()
    assert _series(client, **query) == hours
    return hours


def test_a_date_far_from_utc_reads_the_utc_days_on_both_sides(api_client, message):
    # The 10th in Kiritimati (UTC+14) is 10:00 UTC on the 9th to 10:00 on the 10th; in
    # Pago Pago (UTC-11), 11:00 UTC on the 10th to 11:00 on the 11th. A send just inside
    # and just outside each end of both.
    _sent(message, "2026-06-09T09:59", "2026-06-09T10:00", "2026-06-10T09:59", "2026-06-10T10:00")
    _sent(message, "2026-06-10T10:59", "2026-06-10T11:00", "2026-06-11T10:59", "2026-06-11T11:00")
    day = {"from": "2026-06-10", "to": "2026-06-10"}
    east = _series(api_client, timezone="Pacific/Kiritimati", **day)
    west = _series(api_client, timezone="Pacific/Pago_Pago", **day)
    assert (east, west) == ({"2026-06-10": 2}, {"2026-06-10": 2})
    hours_fold(before=datetime(2026, 6, 12, tzinfo=UTC))
    assert _series(api_client, timezone="Pacific/Kiritimati", **day) == east
    assert _series(api_client, timezone="Pacific/Pago_Pago", **day) == west


def test_hours_before_1970_count_on_their_local_dates(api_client, message):
    # Kolkata was UTC+05:30 then too: the hour from 18:00 UTC on 31 December 1969 starts
    # at 23:30 local, so counts on the 31st (approximated to the hour); the next, the 1st.
    _sent(message, "1969-12-31T17:59", "1969-12-31T18:40", "1969-12-31T19:05")
    query = {"from": "1969-12-31", "to": "1970-01-01", "timezone": "Asia/Kolkata"}
    assert _both(api_client, "1970-01-02T00:00", **query) == {"1969-12-31": 2, "1970-01-01": 1}


def test_a_date_a_zone_skipped_is_a_row_of_zeros(api_client, message):
    # Samoa moved across the date line: 30 December 2011 never began in Apia, its
    # 29th (UTC-10) ending at 10:00 UTC, where the 31st (UTC+14) began.
    _sent(message, "2011-12-30T09:30", "2011-12-30T10:30")
    query = {"from": "2011-12-29", "to": "2011-12-31", "timezone": "Pacific/Apia"}
    series = _both(api_client, "2012-01-01T00:00", **query)
    assert series == {"2011-12-29": 1, "2011-12-30": 0, "2011-12-31": 1}
