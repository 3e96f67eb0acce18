"""Rewrite the roles table of docs/accounts.md from the code's (config.api.roles).

The test suite fails while the document differs from the code
(tests/accounts/test_roles_table.py); this command brings it back in step.
"""

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand

from config.api.roles import roles_table_apply

DOCUMENT = Path(settings.BASE_DIR) / "docs" / "accounts.md"


class Command(BaseCommand):
    help = "Rewrite the roles table of docs/accounts.md from config.api.roles."

    def handle(self, *args, **options):
        text = DOCUMENT.read_text()
        updated = roles_table_apply(text)
        if updated != text:
            DOCUMENT.write_text(updated)
            self.stdout.write("docs/accounts.md: roles table rewritten")
        else:
            self.stdout.write("docs/accounts.md: roles table up to date")
