"""Send windows: when a campaign may send, in its own time zone.

A window is local wall-clock hours on some ISO weekdays ({start: "09:00",
end: "17:00", days: [1..5]}). Arithmetic is done on local dates and converted to
UTC per day, so a window keeps its local hours across DST changes: 09:00 in
New York is 14:00 UTC in winter and 13:00 UTC in summer. A start or end inside a
spring-forward gap resolves to the first valid instant after the gap's start
(zoneinfo fold=0: 02:30 on the gap day is 03:30 daylight time); on the fall-back
day an ambiguous time means its first occurrence.
"""

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from outreach.models.campaigns import Campaign

_DAYS = range(1, 8)


@dataclass(frozen=True)
class SendWindow:
    start: time
    end: time
    days: frozenset[int]

    @classmethod
    def from_json(cls, value: dict[str, Any] | None) -> "SendWindow | None":
        """The stored campaign.send_window (already validated), or None: always open."""
        if not value:
            return None
        return cls(
            start=time.fromisoformat(value["start"]),
            end=time.fromisoformat(value["end"]),
            days=frozenset(value["days"]),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "start": self.start.strftime("%H:%M"),
            "end": self.end.strftime("%H:%M"),
            "days": sorted(self.days),
        }


def send_window_errors(value: Any) -> dict[str, list[str]]:
    """Validation of a send_window object, by sub-field; {} when valid (null is valid)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        return {"": ["Must be an object {start, end, days} or null."]}
    errors: dict[str, list[str]] = {}
    unknown = set(value) - {"start", "end", "days"}
    if unknown:
        errors[""] = [f"Unknown keys: {', '.join(sorted(unknown))}."]
    parsed = {}
    for key in ("start", "end"):
        raw = value.get(key)
        if not isinstance(raw, str) or len(raw) != 5 or raw[2] != ":":
            errors[key] = ['Must be a time "HH:MM" (24-hour).']
            continue
        try:
            parsed[key] = time.fromisoformat(raw)
        except ValueError:
            errors[key] = ['Must be a time "HH:MM" (24-hour).']
    if len(parsed) == 2 and parsed["end"] <= parsed["start"]:
        errors["end"] = ["Must be after start (windows do not span midnight)."]
    days = value.get("days")
    if (
        not isinstance(days, list)
        or not days
        or any(type(d) is not int or d not in _DAYS for d in days)
    ):
        errors["days"] = ["Must be a non-empty list of ISO weekdays (1 = Monday ... 7 = Sunday)."]
    elif len(set(days)) != len(days):
        errors["days"] = ["Must not repeat a day."]
    return errors


def _local_instant(day: date, at: time, zone: ZoneInfo) -> datetime:
    # Through UTC, so a wall time in a DST gap lands on a real instant.
    return datetime.combine(day, at, tzinfo=zone).astimezone(UTC)


def send_window_next_open(at: datetime, *, timezone: str, window: SendWindow | None) -> datetime:
    """The earliest instant >= `at` (aware) inside the window: `at` itself when the window
    is open then (or when there is no window), else the next opening. UTC result."""
    at = at.astimezone(UTC)
    if window is None:
        return at
    zone = ZoneInfo(timezone)
    local_day = at.astimezone(zone).date()
    # Start a day early: with a far-east zone the previous local day's window can still hold `at`.
    for offset in range(-1, 9):
        day = local_day + timedelta(days=offset)
        if day.isoweekday() not in window.days:
            continue
        opens = _local_instant(day, window.start, zone)
        closes = _local_instant(day, window.end, zone)
        if at < opens:
            return opens
        if at < closes:
            return at
    raise ValueError("A send window with no day cannot open.")  # validated away


def send_window_contains(at: datetime, *, timezone: str, window: SendWindow | None) -> bool:
    return send_window_next_open(at, timezone=timezone, window=window) == at.astimezone(UTC)


def step_send_at(
    *, after: datetime, delay_minutes: int, timezone: str, window: SendWindow | None
) -> datetime:
    """When a step with `delay_minutes` counted from `after` goes out: the delay, then the
    next window opening. Dispatch uses it for step 1, the sending engine for later steps."""
    return send_window_next_open(
        after + timedelta(minutes=delay_minutes), timezone=timezone, window=window
    )


def window_timezone(*, campaign: Campaign, contact_timezone: str) -> str:
    """The zone a campaign's send window is read in for one contact: the contact's own
    when the campaign sends in contact time zones and the contact has one, else the
    campaign's."""
    if campaign.send_in_contact_timezone and contact_timezone:
        return contact_timezone
    return campaign.timezone
