"""Send-window arithmetic in the campaign's time zone, across DST changes."""

from datetime import UTC, datetime

import pytest

from outreach.campaigns.windows import (
    SendWindow,
    send_window_contains,
    send_window_errors,
    send_window_next_open,
    step_send_at,
)
from outreach.timezones import timezone_valid

WEEKDAYS_9_17 = SendWindow.from_json({"start": "09:00", "end": "17:00", "days": [1, 2, 3, 4, 5]})


def utc(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


def test_no_window_is_always_open():
    at = utc(2026, 3, 8, 3, 0)
    assert send_window_next_open(at, timezone="UTC", window=None) == at


def test_inside_the_window_sends_now():
    at = utc(2026, 1, 14, 15, 0)  # Wednesday 10:00 in New York (EST, UTC-5)
    assert send_window_next_open(at, timezone="America/New_York", window=WEEKDAYS_9_17) == at
    assert send_window_contains(at, timezone="America/New_York", window=WEEKDAYS_9_17)


def test_before_opening_waits_for_today_start():
    at = utc(2026, 1, 14, 12, 0)  # Wednesday 07:00 EST
    assert send_window_next_open(at, timezone="America/New_York", window=WEEKDAYS_9_17) == utc(
        2026, 1, 14, 14, 0
    )


def test_after_closing_on_friday_waits_for_monday():
    at = utc(2026, 1, 16, 23, 0)  # Friday 18:00 EST
    assert send_window_next_open(at, timezone="America/New_York", window=WEEKDAYS_9_17) == utc(
        2026, 1, 19, 14, 0
    )


def test_end_is_exclusive():
    at = utc(2026, 1, 14, 22, 0)  # Wednesday 17:00 EST exactly
    assert not send_window_contains(at, timezone="America/New_York", window=WEEKDAYS_9_17)
    assert send_window_next_open(at, timezone="America/New_York", window=WEEKDAYS_9_17) == utc(
        2026, 1, 15, 14, 0
    )


def test_spring_forward_keeps_local_opening_hour():
    # US DST starts Sunday 2026-03-08. Friday 18:00 EST -> Monday 09:00 EDT = 13:00 UTC.
    at = utc(2026, 3, 6, 23, 0)
    assert send_window_next_open(at, timezone="America/New_York", window=WEEKDAYS_9_17) == utc(
        2026, 3, 9, 13, 0
    )


def test_fall_back_keeps_local_opening_hour():
    # US DST ends Sunday 2026-11-01. Friday 18:00 EDT -> Monday 09:00 EST = 14:00 UTC.
    at = utc(2026, 10, 30, 22, 0)
    assert send_window_next_open(at, timezone="America/New_York", window=WEEKDAYS_9_17) == utc(
        2026, 11, 2, 14, 0
    )


def test_start_inside_the_spring_gap_moves_past_it():
    # 02:30 does not exist in Europe/Paris on 2026-03-29 (02:00 -> 03:00).
    window = SendWindow.from_json({"start": "02:30", "end": "04:00", "days": [7]})
    at = utc(2026, 3, 28, 12, 0)
    opens = send_window_next_open(at, timezone="Europe/Paris", window=window)
    assert opens == utc(2026, 3, 29, 1, 30)  # 03:30 CEST
    assert send_window_contains(opens, timezone="Europe/Paris", window=window)


def test_ambiguous_fall_back_time_uses_first_occurrence():
    # 02:30 happens twice in Europe/Paris on 2026-10-25: first at 00:30 UTC (CEST).
    window = SendWindow.from_json({"start": "02:30", "end": "05:00", "days": [7]})
    at = utc(2026, 10, 24, 12, 0)
    assert send_window_next_open(at, timezone="Europe/Paris", window=window) == utc(
        2026, 10, 25, 0, 30
    )


def test_far_east_zone_previous_local_day_window():
    # Pacific/Kiritimati is UTC+14: 2026-01-14 20:00 UTC is Thursday 10:00 local.
    at = utc(2026, 1, 14, 20, 0)
    assert send_window_contains(at, timezone="Pacific/Kiritimati", window=WEEKDAYS_9_17)


def test_step_send_at_adds_delay_then_window():
    after = utc(2026, 1, 16, 21, 0)  # Friday 16:00 EST
    assert step_send_at(
        after=after, delay_minutes=30, timezone="America/New_York", window=WEEKDAYS_9_17
    ) == utc(2026, 1, 16, 21, 30)
    assert step_send_at(
        after=after, delay_minutes=120, timezone="America/New_York", window=WEEKDAYS_9_17
    ) == utc(2026, 1, 19, 14, 0)


def test_round_trip_json():
    assert WEEKDAYS_9_17.to_json() == {"start": "09:00", "end": "17:00", "days": [1, 2, 3, 4, 5]}


@pytest.mark.parametrize(
    ("value", "fields"),
    [
        (None, set()),
        ({"start": "09:00", "end": "17:00", "days": [1]}, set()),
        ({"start": "9:00", "end": "17:00", "days": [1]}, {"start"}),
        ({"start": "25:00", "end": "17:00", "days": [1]}, {"start"}),
        ({"start": "17:00", "end": "09:00", "days": [1]}, {"end"}),
        ({"start": "09:00", "end": "09:00", "days": [1]}, {"end"}),
        ({"start": "09:00", "end": "17:00", "days": []}, {"days"}),
        ({"start": "09:00", "end": "17:00", "days": [0, 8]}, {"days"}),
        ({"start": "09:00", "end": "17:00", "days": [1, 1]}, {"days"}),
        ({"start": "09:00", "end": "17:00", "days": ["1"]}, {"days"}),
        ({"start": "09:00", "end": "17:00", "days": [1], "tz": "x"}, {""}),
        ("always", {""}),
    ],
)
def test_send_window_validation(value, fields):
    assert set(send_window_errors(value)) == fields


@pytest.mark.parametrize(
    ("name", "valid"),
    [
        ("UTC", True),
        ("Europe/Paris", True),
        ("America/New_York", True),
        ("Mars/Olympus", False),
        ("", False),
        ("../../etc/passwd", False),
        ("europe/paris", False),
    ],
)
def test_timezone_valid(name, valid):
    assert timezone_valid(name) is valid
