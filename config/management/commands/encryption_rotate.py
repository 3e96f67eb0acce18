"""Re-encrypt every stored secret with the first key of FIELD_ENCRYPTION_KEY.

Rotation: set FIELD_ENCRYPTION_KEY="<new>,<old>", deploy, run this command, then
set FIELD_ENCRYPTION_KEY="<new>". Safe to re-run and to run while the service
serves traffic: each row is rewritten alone, and any configured key still opens it.
"""

from django.core.management.base import BaseCommand
from django.db import transaction

from accounts.models import IdempotencyRecord
from config.crypto import bytes_rotate
from outreach.crypto import EncryptedTextField
from outreach.mailboxes.models import OAuthAuthorization, SmtpCredential
from webhooks.models import Webhook


class Command(BaseCommand):
    help = "Re-encrypt stored secrets with the first key of FIELD_ENCRYPTION_KEY."

    def handle(self, *args, **options):
        self._fields(SmtpCredential)  # passwords, signing keys, OAuth tokens
        self._fields(OAuthAuthorization)  # PKCE code verifiers of flows in progress
        self._column(Webhook, "secret_encrypted", text=True)
        self._column(IdempotencyRecord, "response_body_encrypted", text=False)

    def _fields(self, model) -> None:
        """Models with EncryptedTextField: loading decrypts with any key, saving
        encrypts with the first. Each row is read again under a lock, so a value
        written meanwhile (an OAuth token refresh) is rotated, not overwritten."""
        names = [f.name for f in model._meta.fields if isinstance(f, EncryptedTextField)]
        count = 0
        for pk in model.objects.values_list("pk", flat=True).iterator(chunk_size=500):
            with transaction.atomic():
                obj = model.objects.select_for_update().only(*names).filter(pk=pk).first()
                if obj is None:
                    continue
                obj.save(update_fields=names)
            count += 1
        self.stdout.write(f"{model._meta.label}: {count} re-encrypted ({', '.join(names)})")

    def _column(self, model, field: str, *, text: bool) -> None:
        count = 0
        rows = model.objects.exclude(**{field: b"" if not text else ""}).values_list("pk", field)
        for pk, token in rows.iterator(chunk_size=500):
            raw = token.encode() if text else bytes(token)
            rotated = bytes_rotate(raw)
            model.objects.filter(pk=pk).update(**{field: rotated.decode() if text else rotated})
            count += 1
        self.stdout.write(f"{model._meta.label}.{field}: {count} re-encrypted")
