from typing import Any

from django.core.management.base import BaseCommand

from accounts.services import idempotency_records_prune


class Command(BaseCommand):
    help = "Delete Idempotency-Key records older than 24 hours (beat also runs this hourly)."

    def handle(self, *args: Any, **options: Any) -> None:
        deleted = idempotency_records_prune()
        self.stdout.write(f"Deleted {deleted} idempotency record(s) older than 24 hours.")
