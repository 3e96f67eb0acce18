"""Encryption at rest for mailbox secrets (SMTP/IMAP passwords, relay signing keys).

Fernet with the keys of FIELD_ENCRYPTION_KEY (config.crypto). The column holds
the Fernet token; the plaintext exists only in memory, when a
service reads the attribute to log in to a mailbox or verify a signature.
"""

from django.db import models

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
