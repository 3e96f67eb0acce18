"""Per-key daily send limits (docs/accounts.md, "Daily send limits").

A key's `daily_send_limit` bounds the contacts it dispatches, enrols or answers per UTC
day. `key_sends_count` raises the day's counter (KeySendCount) inside the send's own
transaction, by one conditional upsert: the row it locks serialises the key's sends
until the transaction ends, so two concurrent dispatches cannot both pass the limit, and
a send that is rolled back counts nothing. Keys without a limit count nothing (and cost
no query).
"""

from datetime import UTC, datetime, time, timedelta

from django.db import connection
from django.utils import timezone

from accounts.errors import KeySendLimitReached
from accounts.models import ApiKey, KeySendCount


def _day_and_reset(now: datetime) -> tuple:
    day = now.astimezone(UTC).date()
    resets_at = datetime.combine(day + timedelta(days=1), time.min, tzinfo=UTC)
    return day, resets_at


def _refusal(api_key: ApiKey, day, resets_at: datetime) -> KeySendLimitReached:
    row = KeySendCount.objects.filter(api_key_id=api_key.pk, day=day).first()
    return KeySendLimitReached(
        details={
            "limit": api_key.daily_send_limit,
            "used": row.count if row else 0,
            "resets_at": resets_at.isoformat().replace("+00:00", "Z"),
        }
    )


def key_sends_check(*, api_key: ApiKey | None, count: int, now: datetime | None = None) -> None:
    """KeySendLimitReached when `count` more contacts would pass the key's limit today.
    Counts nothing (a drafter's request, before its approval)."""
    if api_key is None or api_key.daily_send_limit is None:
        return
    day, resets_at = _day_and_reset(now or timezone.now())
    row = KeySendCount.objects.filter(api_key_id=api_key.pk, day=day).first()
    if (row.count if row else 0) + count > api_key.daily_send_limit:
        raise _refusal(api_key, day, resets_at)


def key_sends_count(*, api_key: ApiKey | None, count: int, now: datetime | None = None) -> None:
    """Count `count` contacts against the key's limit today, or raise
    KeySendLimitReached (counting nothing) when they would pass it. Inside the send's
    transaction: its rollback takes the count back."""
    if api_key is None or api_key.daily_send_limit is None or count <= 0:
        return
    day, resets_at = _day_and_reset(now or timezone.now())
    table = KeySendCount._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} AS t (api_key_id, day, count) "  # noqa: S608 (our table)
            "SELECT %s, %s, %s WHERE %s <= %s "
            "ON CONFLICT (api_key_id, day) DO UPDATE SET count = t.count + EXCLUDED.count "
            "WHERE t.count + EXCLUDED.count <= %s RETURNING count",
            [
                api_key.pk,
                day,
                count,
                count,
                api_key.daily_send_limit,
                api_key.daily_send_limit,
            ],
        )
        counted = cursor.fetchone()
    if counted is None:
        raise _refusal(api_key, day, resets_at)
