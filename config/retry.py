"""Retry schedules: a list of delays whose last value repeats."""

from collections.abc import Callable, Sequence


def schedule_delay(
    schedule: Sequence[int],
    attempts_done: int,
    *,
    fallback: Sequence[int] | Callable[[int], int] | None = None,
    minimum: int | None = None,
) -> int:
    """The delay (seconds) before attempt `attempts_done + 1` in `schedule`: its
    `attempts_done`-th value, the last one repeating once the list runs out.

    An empty `schedule` uses `fallback`: another schedule read the same way, or a
    function of `attempts_done`. `minimum` clamps a value read from `schedule` (an
    operator's setting) from below; a fallback function's result is used as it is.
    """
    if not schedule:
        if callable(fallback):
            return fallback(attempts_done)
        schedule = fallback or schedule
    delay = schedule[min(attempts_done, len(schedule)) - 1]
    return delay if minimum is None else max(minimum, int(delay))
