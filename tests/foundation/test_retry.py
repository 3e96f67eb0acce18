"""The one retry-schedule helper (config.retry) and the two schedules read through it:
outreach's send retries and webhooks' delivery retries keep their results."""

from datetime import timedelta

import pytest

from config.retry import schedule_delay
from outreach.sending.record import retry_delay as send_retry_delay
from webhooks.posting import retry_delay as webhook_retry_delay


def test_schedule_delay_reads_the_schedule_and_repeats_its_last_value():
    assert [schedule_delay([10, 20, 30], n) for n in range(1, 6)] == [10, 20, 30, 30, 30]
    assert schedule_delay([10, 20, 30], 0) == 30


def test_schedule_delay_falls_back_on_an_empty_schedule():
    assert [schedule_delay([], n, fallback=[7, 8]) for n in (1, 2, 3)] == [7, 8, 8]
    assert [schedule_delay([], n, fallback=lambda n: n * 100) for n in (1, 2)] == [100, 200]
    assert schedule_delay([5], 1, fallback=[7]) == 5
    with pytest.raises(IndexError):
        schedule_delay([], 1)


def test_schedule_delay_clamps_only_the_schedule_values():
    assert schedule_delay([-5, 3], 1, minimum=0) == 0
    assert schedule_delay([-5, 3], 1) == -5
    assert schedule_delay([], -1, fallback=lambda n: 60 * n**3, minimum=0) == -60


@pytest.mark.parametrize(
    ("schedule", "expected"),
    [
        ([60, 600], [600, 60, 600, 600, 600]),
        ([120], [120, 120, 120, 120, 120]),
        ([], [300, 300, 300, 300, 300]),
        ([-30, 10], [10, -30, 10, 10, 10]),  # no clamp: the setting is used as it is
    ],
)
def test_send_retry_delay(settings, schedule, expected):
    settings.SENDING_RETRY_SCHEDULE = schedule
    assert [send_retry_delay(n) for n in range(5)] == [timedelta(seconds=s) for s in expected]


@pytest.mark.parametrize(
    ("schedule", "expected"),
    [
        ([], [0, 60, 480, 1620, 3840]),
        ([5, 10], [10, 5, 10, 10, 10]),
        ([-30, 10], [10, 0, 10, 10, 10]),  # clamped at 0
    ],
)
def test_webhook_retry_delay(settings, schedule, expected):
    settings.WEBHOOK_RETRY_SCHEDULE = schedule
    assert [webhook_retry_delay(n) for n in range(5)] == expected
