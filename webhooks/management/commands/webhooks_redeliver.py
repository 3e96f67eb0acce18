from datetime import UTC, datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from webhooks.operations import jobs_redeliver_failed


def _when(value: str) -> datetime:
    parsed = parse_datetime(value)
    if parsed is None:
        day = parse_date(value)
        if day is None:
            raise CommandError(f"Not an ISO 8601 date or datetime: {value!r}")
        parsed = datetime(day.year, day.month, day.day)
    if timezone.is_naive(parsed):
        parsed = parsed.replace(tzinfo=UTC)
    return parsed


class Command(BaseCommand):
    help = (
        "Send again every failed webhook delivery whose event was emitted in [--since, --until). "
        "Same envelope id, a fresh budget of 5 attempts; disabled webhooks are skipped."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--since", required=True, help="ISO 8601 date or datetime (UTC if no offset)."
        )
        parser.add_argument("--until", help="ISO 8601 date or datetime, exclusive; default now.")

    def handle(self, *args: Any, since: str, until: str | None = None, **options: Any) -> None:
        start = _when(since)
        end = _when(until) if until else timezone.now()
        if end <= start:
            raise CommandError("--until must be after --since.")
        with transaction.atomic():
            count = jobs_redeliver_failed(since=start, until=end)
        self.stdout.write(f"{count} failed deliveries queued again.")
