"""Encryption at rest for what the service must read back: mailbox passwords,
relay signing keys and OAuth tokens, webhook signing secrets, stored idempotent
responses. Every one of them is an EncryptedTextField.

FIELD_ENCRYPTION_KEY holds one Fernet key (AES-128-CBC + HMAC-SHA256), or several
separated by commas: the first encrypts, every one of them decrypts. To rotate,
put a new key first and keep the old one after it, run
`manage.py encryption_rotate` (re-encrypts every EncryptedTextField of every
installed model with the first key), then drop the old key.
"""

from functools import lru_cache
from typing import TYPE_CHECKING, Any, TypeVar

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.apps import apps
from django.conf import settings
from django.db import models


class DecryptionFailed(ValueError):
    """A stored value no configured key opens. Carries no token and no key."""


@lru_cache(maxsize=4)
def _keyring(keys: str) -> MultiFernet:
    return MultiFernet([Fernet(key.strip().encode()) for key in keys.split(",") if key.strip()])


def keyring() -> MultiFernet:
    return _keyring(settings.FIELD_ENCRYPTION_KEY)


def text_encrypt(plaintext: str) -> str:
    return keyring().encrypt(plaintext.encode()).decode()


def text_decrypt(token: str) -> str:
    try:
        return keyring().decrypt(token.encode()).decode()
    except InvalidToken:
        raise DecryptionFailed(
            "A stored secret cannot be decrypted with FIELD_ENCRYPTION_KEY's keys."
        ) from None


if TYPE_CHECKING:
    _TextField = models.TextField[str, str]  # set and read as text
else:
    _TextField = models.TextField


class EncryptedTextField(_TextField):
    """A text field stored as a Fernet token; reading the attribute gives the
    plaintext, which exists only in memory. The empty string stays empty (it means
    "no secret"), so "is a secret set" needs no decryption."""

    def from_db_value(self, value: str | None, expression: Any, connection: Any) -> str | None:
        if value is None or value == "":
            return value
        return text_decrypt(value)

    def get_prep_value(self, value: Any) -> Any:
        value = super().get_prep_value(value)
        if value is None or value == "":
            return value
        return text_encrypt(value)

    def value_to_string(self, obj: models.Model) -> str:
        """Serialized (dumpdata, fixtures) as the stored token, never the plaintext: a
        dump holds no secret a configured key does not guard."""
        value = self.value_from_object(obj)
        return text_encrypt(value) if value else value

    def to_python(self, value: Any) -> Any:
        """A token from a dump (value_to_string) loads as its plaintext; anything no
        configured key opens is taken as plaintext already."""
        if isinstance(value, str) and value.startswith("gAAAAA"):
            try:
                return text_decrypt(value)
            except DecryptionFailed:
                return value
        return super().to_python(value)


_M = TypeVar("_M", bound=models.Model)


def encrypted_fields() -> dict[type[models.Model], list[str]]:
    """Every installed model with an EncryptedTextField, and the names of those fields."""
    found: dict[type[models.Model], list[str]] = {}
    for model in apps.get_models():
        names = [f.name for f in model._meta.concrete_fields if isinstance(f, EncryptedTextField)]
        if names:
            found[model] = names
    return found


def secrets_deferred(queryset: models.QuerySet[_M]) -> models.QuerySet[_M]:
    """`queryset` without its model's encrypted fields: code that never reads a secret
    (the scheduler locking mailboxes) neither loads nor decrypts one. Reading one of them
    from a row anyway costs a query of its own, which query-count tests see."""
    model = queryset.model
    names = [f.name for f in model._meta.concrete_fields if isinstance(f, EncryptedTextField)]
    return queryset.defer(*names)
