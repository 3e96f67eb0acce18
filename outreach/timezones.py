"""IANA time zone names, as the campaigns' send windows and the contacts' own zones
accept them."""

from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones


def timezone_valid(name: str) -> bool:
    if not name or name not in _zone_names():
        return False
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True


_ZONES: set[str] | None = None


def _zone_names() -> set[str]:
    global _ZONES
    if _ZONES is None:
        _ZONES = available_timezones()
    return _ZONES


def timezone_errors(value: object) -> str | None:
    """Why a contact's time zone is not acceptable; None for an IANA name, "" or null."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        return "Must be a string."
    if not timezone_valid(value.strip()):
        return f"{value[:64]!r} is not an IANA time zone name (e.g. Asia/Tokyo)."
    return None
