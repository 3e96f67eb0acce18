"""manage.py contacts_import <account-id-or-email> <file.csv> [--campaign ID]

Imports a CSV for an account in this process, with the same rules (and the same
ContactImport row, visible through the API) as POST /contact_imports, printing a
progress bar.
"""

import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import Q

from accounts.models import Account
from config.api.ids import is_uuid
from outreach.contacts import imports
from outreach.models.campaigns import Campaign
from outreach.models.contacts import ContactImport

BAR_WIDTH = 40


class Command(BaseCommand):
    help = (
        "Import contacts from a CSV file for an account (optionally enrolling them in a campaign)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("account", help="Account id or email.")
        parser.add_argument("file", help="CSV file with a header row and an email column.")
        parser.add_argument("--campaign", help="Campaign id: enroll the contacts as pending.")

    def handle(self, *args: Any, **options: Any) -> None:
        account = self._account(options["account"])
        path = Path(options["file"])
        if not path.is_file():
            raise CommandError(f"No such file: {path}")
        campaign = None
        if options["campaign"]:
            campaign = (
                Campaign.objects.filter(account=account, pk=options["campaign"]).first()
                if is_uuid(options["campaign"])
                else None
            )
            if campaign is None:
                raise CommandError(f"No campaign {options['campaign']} in account {account.email}.")

        contact_import = ContactImport.objects.create(
            account=account,
            campaign=campaign,
            source_format=ContactImport.Format.CSV,
            source_data=path.read_bytes(),
            filename=path.name[:255],
        )
        result = imports.contact_import_run(import_id=contact_import.pk, progress=self._progress)
        if self.stdout.isatty():
            self.stdout.write("")
        result = result or ContactImport.objects.get(pk=contact_import.pk)
        if result.status == ContactImport.Status.FAILED:
            raise CommandError(f"Import {result.pk} failed: {result.failure_reason}")
        self.stdout.write(
            self.style.SUCCESS(
                f"Import {result.pk}: {result.processed_rows} rows, {result.created_count} created, "
                f"{result.updated_count} updated, {result.skipped_count} skipped."
            )
        )
        for error in result.errors[:20]:
            self.stdout.write(f"  row {error['row']} ({error['email']}): {error['message']}")
        if result.skipped_count > 20:
            self.stdout.write(f"  ... see GET /contact_imports/{result.pk} for up to 100 errors.")

    def _account(self, ref: str) -> Account:
        query = Q(email__iexact=ref)
        if is_uuid(ref):
            query |= Q(pk=ref)
        accounts = list(Account.objects.filter(query)[:2])
        if len(accounts) != 1:
            raise CommandError(f"No single account matches {ref!r}.")
        return accounts[0]

    def _progress(self, done: int, total: int) -> None:
        filled = BAR_WIDTH if not total else int(BAR_WIDTH * done / total)
        percent = 100 if not total else 100 * done // total
        bar = f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {done}/{total} rows ({percent}%)"
        if self.stdout.isatty():
            self.stdout.write(f"\r{bar}", ending="")
            sys.stdout.flush()
        else:
            self.stdout.write(bar)
