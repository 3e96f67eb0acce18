"""The account's day of simulator sends (SIMULATOR_DAILY_LIMIT, docs/sandbox.md): the
sends of its simulator mailboxes on a UTC day, reserved ones included, as their daily
counters hold them (outreach.mailboxes.pace). Past the limit, simulator sends wait for
the next UTC day."""

from datetime import datetime

from django.conf import settings
from django.db import connection
from django.db.models import Sum

from outreach.mailboxes.pace import utc_day
from outreach.models.mailboxes import SmtpCredential


def simulator_sent_today(account_id, now: datetime) -> int:
    """The account's simulator sends on the UTC day of `now`, reserved ones included."""
    total = SmtpCredential.objects.filter(
        account_id=account_id,
        auth_method=SmtpCredential.AuthMethod.SIMULATOR,
        daily_sent_on=utc_day(now),
    ).aggregate(total=Sum("daily_sent_count"))["total"]
    return total or 0


def _day_lock(account_id) -> bool:
    """The account's simulator day, held until the transaction ends, if no other
    transaction holds it (never waits: a scheduler that would wait leaves the sends to a
    later run, as for a recipient domain's count)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_try_advisory_xact_lock(hashtext(%s))", [f"simulator-day:{account_id}"]
        )
        return bool(cursor.fetchone()[0])


class SimulatorDay:
    """A scheduler transaction's view of its accounts' simulator days: each read once,
    under the account's lock, then counted down by the claims it makes."""

    def __init__(self, now: datetime) -> None:
        self.now = now
        self.left: dict = {}

    def take(self, account_id) -> bool | None:
        """For a claim of one of the account's simulator mailboxes (a real mailbox's send
        is not counted: the caller asks only for a simulator's): True (the send counted),
        False when the account's simulator day is full, None when another transaction is
        counting it (a later run)."""
        if account_id not in self.left:
            held = _day_lock(account_id)
            self.left[account_id] = (
                settings.SIMULATOR_DAILY_LIMIT - simulator_sent_today(account_id, self.now)
                if held
                else None
            )
        left = self.left[account_id]
        if left is None or left <= 0:
            return None if left is None else False
        self.left[account_id] = left - 1
        return True
