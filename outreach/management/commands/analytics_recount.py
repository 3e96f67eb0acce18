"""manage.py analytics_recount [account_id ...]

Rebuilds the hourly analytics counters (GET /analytics, the staff dashboard) of these
accounts (default: every account) from their messages and events
(outreach.analytics.recount): run it once after upgrading to fill the hours from before
the counters were kept on write, or to repair them. Each account is one transaction
during which sends wait (docs/analytics.md).
"""

from typing import Any
from uuid import UUID

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.models import Account
from config.api.ids import is_uuid
from outreach.analytics.recount import analytics_recount
from outreach.sending.recovery import SUPPRESSED_BOUNCE_REASON


class Command(BaseCommand):
    help = "Rebuild the hourly analytics counters from the messages and events."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("account_ids", nargs="*", help="Account ids (default: all).")

    def handle(self, *args: Any, account_ids: list[str], **options: Any) -> None:
        accounts = Account.objects.order_by("pk")
        if account_ids:
            valid = [UUID(a) for a in account_ids if is_uuid(a)]
            found = set(accounts.filter(pk__in=valid).values_list("pk", flat=True))
            unknown = [a for a in account_ids if not is_uuid(a) or UUID(a) not in found]
            if unknown:
                raise CommandError(f"No account {', '.join(unknown)}.")
            accounts = accounts.filter(pk__in=found)
        done = 0
        for account_id in accounts.values_list("pk", flat=True).iterator():
            analytics_recount(
                account_id=account_id, skip_bounce_reasons=(SUPPRESSED_BOUNCE_REASON,)
            )
            done += 1
        self.stdout.write(f"{done} account(s) recounted.")
