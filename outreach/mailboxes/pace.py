"""Pace and daily quota of a mailbox (UTC days)."""

import random
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db.models import Case, F, Value, When
from django.db.models.functions import Greatest

from outreach.models.mailboxes import SmtpCredential


def utc_day(at: datetime) -> date:
    return at.astimezone(UTC).date()


def next_utc_midnight(at: datetime) -> datetime:
    return datetime.combine(utc_day(at) + timedelta(days=1), time(0), tzinfo=UTC)


def ramp_limit(credential: SmtpCredential, today: date) -> int | None:
    """The ramp-up's limit on `today` (UTC), `start_per_day + increase_per_day × n`, n the
    days since its first claim after ramp_up was set (0 until then); None without one."""
    ramp = credential.ramp_up
    if not ramp:
        return None
    started = credential.ramp_started_on
    days = max(0, (today - started).days) if started is not None else 0
    return int(ramp["start_per_day"]) + int(ramp["increase_per_day"]) * days


def daily_limit_in_force(credential: SmtpCredential, today: date) -> int:
    """The mailbox's daily limit on `today`, at most DAILY_LIMIT_MAX (a limit stored above
    it, before the maximum existed or by staff, counts as the maximum) and at most its
    ramp-up's limit of the day (ramp_limit)."""
    maximum: int = settings.DAILY_LIMIT_MAX
    limit = min(credential.daily_limit, maximum)
    ramp = ramp_limit(credential, today)
    return limit if ramp is None else min(limit, ramp)


def sent_today(credential: SmtpCredential, today: date) -> int:
    """Sends of the mailbox on `today` (UTC), reserved ones included."""
    return credential.daily_sent_count if credential.daily_sent_on == today else 0


def daily_used(today: date) -> Case:
    """The mailbox's sends on `today` (UTC) as an SQL expression: its count, or 0 when the
    count is of an earlier day. `daily_sent_count=daily_used(today) + n` with
    `daily_sent_on=today` adds n sends to the day."""
    return Case(When(daily_sent_on=today, then=F("daily_sent_count")), default=Value(0))


def room_today(credential: SmtpCredential, today: date) -> int:
    """Sends the mailbox may still make on `today` (UTC)."""
    return max(0, daily_limit_in_force(credential, today) - sent_today(credential, today))


def paced_until(credential: SmtpCredential, now: datetime) -> datetime | None:
    """When a paced mailbox may send next, if that is still ahead of `now`; else None."""
    if not credential.is_paced or credential.next_send_earliest_at is None:
        return None
    return credential.next_send_earliest_at if credential.next_send_earliest_at > now else None


def pace_gap(credential: SmtpCredential) -> timedelta:
    """A random gap before the mailbox's next send, uniform over [min, max] seconds."""
    low, high = credential.min_interval_seconds, credential.max_interval_seconds
    return timedelta(seconds=random.uniform(low, high))  # noqa: S311 - spacing, not secrecy


def next_send_rebased(credential: SmtpCredential, now: datetime) -> datetime | None:
    """`next_send_earliest_at` after the mailbox's pace changed: None (it may send now)
    when pacing is off (0 / 0); otherwise the earlier of the time it had and now plus a
    gap of the new pace, so a shorter pace applies at once and a longer one never pushes
    back a send that was already allowed."""
    if not credential.is_paced:
        return None
    current = credential.next_send_earliest_at
    if current is None or current <= now:
        return current
    return min(current, now + pace_gap(credential))


def reservation_release(*, credential_id: UUID, at: datetime, count: int = 1) -> None:
    """Give back `count` reserved sends of the day of `at` (a claim that did not send)."""
    SmtpCredential.objects.filter(pk=credential_id, daily_sent_on=utc_day(at)).update(
        daily_sent_count=Greatest(F("daily_sent_count") - count, 0)
    )


def pace_errors(attrs: dict[str, Any], credential: SmtpCredential | None) -> dict[str, list[str]]:
    """The pace pair checked: min_interval_seconds at most max_interval_seconds, each from
    the request or else the mailbox (or the defaults). The error is named after the field
    the request changed (min when it changed both)."""
    low, high = (
        attrs.get(name, getattr(credential or SmtpCredential(), name))
        for name in ("min_interval_seconds", "max_interval_seconds")
    )
    if low <= high:
        return {}
    field = "min_interval_seconds" if "min_interval_seconds" in attrs else "max_interval_seconds"
    return {field: [f"min_interval_seconds ({low}) must not exceed max_interval_seconds ({high})."]}
