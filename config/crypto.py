"""Encryption at rest for what the service must read back: mailbox passwords and
relay signing keys, webhook signing secrets, stored idempotent responses.

FIELD_ENCRYPTION_KEY holds one Fernet key (AES-128-CBC + HMAC-SHA256), or several
separated by commas: the first encrypts, every one of them decrypts. To rotate,
put a new key first and keep the old one after it, run
`manage.py encryption_rotate` (re-encrypts every stored value with the first
key), then drop the old key.
"""

from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings


class DecryptionFailed(ValueError):
    """A stored value no configured key opens. Carries no token and no key."""


@lru_cache(maxsize=4)
def _keyring(keys: str) -> MultiFernet:
    return MultiFernet([Fernet(key.strip().encode()) for key in keys.split(",") if key.strip()])


def keyring() -> MultiFernet:
    return _keyring(settings.FIELD_ENCRYPTION_KEY)


def bytes_encrypt(data: bytes) -> bytes:
    return keyring().encrypt(data)


def bytes_decrypt(token: bytes) -> bytes:
    try:
        return keyring().decrypt(token)
    except InvalidToken:
        raise DecryptionFailed(
            "A stored secret cannot be decrypted with FIELD_ENCRYPTION_KEY's keys."
        ) from None


def bytes_rotate(token: bytes) -> bytes:
    """The same plaintext under the first key (a fresh token either way)."""
    try:
        return keyring().rotate(token)
    except InvalidToken:
        raise DecryptionFailed(
            "A stored secret cannot be decrypted with FIELD_ENCRYPTION_KEY's keys."
        ) from None


def text_encrypt(plaintext: str) -> str:
    return bytes_encrypt(plaintext.encode()).decode()


def text_decrypt(token: str) -> str:
    return bytes_decrypt(token.encode()).decode()
