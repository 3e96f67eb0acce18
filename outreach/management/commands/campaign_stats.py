"""manage.py campaign_stats [--repair] [campaign_id ...]

Recounts campaigns' stats from their enrollments and reports every count that differs
from the one kept on write (outreach.enrollments). With --repair the kept counts take
the recount. Exits non-zero when drift was found and not repaired. Safe beside running
workers: each campaign's row is locked for its recount.
"""

from collections.abc import Iterable
from typing import Any
from uuid import UUID

from django.core.management.base import BaseCommand, CommandError, CommandParser

from config.api.ids import is_uuid
from outreach.enrollments import stats_check
from outreach.models.campaigns import Campaign


class Command(BaseCommand):
    help = "Recount campaign stats from the enrollments; report (and with --repair fix) drift."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("campaign_ids", nargs="*", help="Campaign ids (default: all).")
        parser.add_argument(
            "--repair", action="store_true", help="Set the kept counts to the recount."
        )

    def handle(self, *args: Any, campaign_ids: list[str], repair: bool, **options: Any) -> None:
        ids: Iterable[UUID]
        if campaign_ids:
            valid = [UUID(c) for c in campaign_ids if is_uuid(c)]
            found = set(Campaign.objects.filter(pk__in=valid).values_list("pk", flat=True))
            unknown = [c for c in campaign_ids if not is_uuid(c) or UUID(c) not in found]
            if unknown:
                raise CommandError(f"No campaign {', '.join(unknown)}.")
            ids = sorted(found, key=str)
        else:
            ids = Campaign.objects.order_by("pk").values_list("pk", flat=True).iterator()
        checked = drifted = 0
        for campaign_id in ids:
            checked += 1
            drift = stats_check(campaign_id=campaign_id, repair=repair)
            if not drift:
                continue
            drifted += 1
            shown = ", ".join(
                f"{name} kept {kept} counted {actual}" for name, (kept, actual) in drift.items()
            )
            self.stdout.write(f"campaign {campaign_id}: {shown}{' (repaired)' if repair else ''}")
        self.stdout.write(
            f"{checked} campaign(s) checked, {drifted} with drift"
            + (", repaired" if repair and drifted else "")
            + "."
        )
        if drifted and not repair:
            raise CommandError("Campaign stats drifted: run with --repair to fix them.")
