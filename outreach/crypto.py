"""Encryption at rest for mailbox secrets (SMTP/IMAP passwords, relay signing keys).

Fernet (AES-128-CBC + HMAC-SHA256) with the key in FIELD_ENCRYPTION_KEY. The
column holds the Fernet token; the plaintext exists only in memory, when a
service reads the attribute to log in to a mailbox or verify a signature.
"""

from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings
from django.db import models


@lru_cache(maxsize=4)
def _fernet(key: str) -> Fernet:
    return Fernet(key.encode())


def secret_encrypt(plaintext: str) -> str:
    return _fernet(settings.FIELD_ENCRYPTION_KEY).encrypt(plaintext.encode()).decode()


def secret_decrypt(token: str) -> str:
    try:
        return _fernet(settings.FIELD_ENCRYPTION_KEY).decrypt(token.encode()).decode()
    except InvalidToken:
        # Never include the token or the key in the message.
        raise ValueError(
            "A stored secret cannot be decrypted: FIELD_ENCRYPTION_KEY changed?"
        ) from None


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
