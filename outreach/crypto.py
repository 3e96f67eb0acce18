"""Encryption at rest for mailbox secrets (SMTP/IMAP passwords, relay signing keys).

Fernet with the keys of FIELD_ENCRYPTION_KEY (config.crypto). The column holds
the Fernet token; the plaintext exists only in memory, when a
service reads the attribute to log in to a mailbox or verify a signature.
"""

from django.db import models

from config.crypto import DecryptionFailed
from config.crypto import text_decrypt as secret_decrypt
from config.crypto import text_encrypt as secret_encrypt

__all__ = ["EncryptedTextField", "secret_decrypt", "secret_encrypt"]


class EncryptedTextField(models.TextField):
    """A text field stored as a Fernet token. The empty string stays empty
    (it means "no secret"), so "is a password set" needs no decryption."""

    def from_db_value(self, value, expression, connection):
        if value is None or value == "":
            return value
        return secret_decrypt(value)

    def get_prep_value(self, value):
        value = super().get_prep_value(value)
        if value is None or value == "":
            return value
        return secret_encrypt(value)

    def value_to_string(self, obj):
        """Serialized (dumpdata, fixtures) as the stored token, never the plaintext: a
        dump holds no secret a configured key does not guard."""
        value = self.value_from_object(obj)
        return secret_encrypt(value) if value else value

    def to_python(self, value):
        """A token from a dump (value_to_string) loads as its plaintext; anything no
        configured key opens is taken as plaintext already."""
        if isinstance(value, str) and value.startswith("gAAAAA"):
            try:
                return secret_decrypt(value)
            except DecryptionFailed:
                return value
        return super().to_python(value)
