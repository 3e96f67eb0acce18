"""Re-encrypt every stored secret with the first key of FIELD_ENCRYPTION_KEY.

Rotation: set FIELD_ENCRYPTION_KEY="<new>,<old>", deploy, run this command, then
set FIELD_ENCRYPTION_KEY="<new>". Every EncryptedTextField of every installed
model is rotated (config.crypto.encrypted_fields: a new one needs no change here).
Safe to re-run and to run while the service serves traffic: rows are rewritten
BATCH at a time, each batch locked while it is rewritten, and any configured key
still opens what is not rewritten yet.
"""

from itertools import islice

from django.core.management.base import BaseCommand
from django.db import transaction
from django.db.models import Q

from config.crypto import encrypted_fields

BATCH = 500


class Command(BaseCommand):
    help = "Re-encrypt stored secrets with the first key of FIELD_ENCRYPTION_KEY."

    def handle(self, *args, **options):
        for model, names in encrypted_fields().items():
            counts = self._rotate(model, names)
            for name in names:
                self.stdout.write(f"{model._meta.label}.{name}: {counts[name]} re-encrypted")

    def _rotate(self, model, names: list[str]) -> dict[str, int]:
        """Loading decrypts with any key, saving encrypts with the first. Each batch is
        read again under a lock, so a value written meanwhile (an OAuth token refresh)
        is rotated, not overwritten. Returns the number of values rotated per field."""
        counts = dict.fromkeys(names, 0)
        holding = Q(*[~Q(**{name: ""}) for name in names], _connector=Q.OR)
        pks = model.objects.filter(holding).values_list("pk", flat=True)
        pending = pks.iterator(chunk_size=BATCH)
        while batch := list(islice(pending, BATCH)):
            with transaction.atomic():
                rows = list(model.objects.select_for_update().only(*names).filter(pk__in=batch))
                model.objects.bulk_update(rows, names)
            for name in names:
                counts[name] += sum(1 for row in rows if getattr(row, name))
        return counts
