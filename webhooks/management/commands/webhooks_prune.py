from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from webhooks.operations import deliveries_prune


class Command(BaseCommand):
    help = (
        "Delete webhook delivery attempts, finished deliveries and their events older than "
        "N days. Deliveries still pending are kept."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--older-than-days", type=int, required=True, dest="days")

    def handle(self, *args: Any, days: int, **options: Any) -> None:
        if days < 1:
            raise CommandError("--older-than-days must be at least 1.")
        counts = deliveries_prune(older_than=timezone.now() - timedelta(days=days))
        self.stdout.write(
            f"Deleted {counts.deliveries} attempts, {counts.jobs} deliveries, {counts.events} events."
        )
