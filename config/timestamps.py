"""The API's one timestamp format."""

from datetime import UTC, datetime
from typing import overload


@overload
def utc_timestamp(value: datetime) -> str: ...
@overload
def utc_timestamp(value: None) -> None: ...
@overload
def utc_timestamp(value: datetime | None) -> str | None: ...


def utc_timestamp(value: datetime | None) -> str | None:
    """RFC 3339 in UTC with microseconds and `Z` (`2026-11-21T15:49:36.123456Z`), the
    year always four digits (strftime's `%Y` drops the zeros of a year before 1000).
    A naive value is taken to be UTC already; no time (None) stays None, as the API
    writes it (null)."""
    if value is None:
        return None
    value = value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
    return value.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"
