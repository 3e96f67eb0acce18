"""Retry schedules: a list of delays whose last value repeats."""

from collections.abc import Sequence


def schedule_delay(schedule: Sequence[int], attempts_done: int) -> int:
    """The delay (seconds) before attempt `attempts_done + 1` in `schedule`: its
    `attempts_done`-th value, the last one repeating once the list runs out."""
    return schedule[min(attempts_done, len(schedule)) - 1]
