"""Webhook signing secrets: made, encrypted at rest, and used to sign.

The secret has to be recoverable to sign each delivery, so it is stored
encrypted (Fernet, FIELD_ENCRYPTION_KEY) rather than hashed.
"""

import functools
import hashlib
import hmac
import secrets

from cryptography.fernet import Fernet
from django.conf import settings

SECRET_PREFIX = "whsec_"  # noqa: S105 (a prefix, not a secret)


def secret_generate() -> str:
    """`whsec_` and 32 random bytes, URL-safe base64 (43 characters)."""
    return SECRET_PREFIX + secrets.token_urlsafe(32)


@functools.lru_cache(maxsize=4)
def _fernet(key: str) -> Fernet:
    return Fernet(key.encode())


def secret_encrypt(secret: str) -> str:
    return _fernet(settings.FIELD_ENCRYPTION_KEY).encrypt(secret.encode()).decode()


def secret_decrypt(token: str) -> str:
    return _fernet(settings.FIELD_ENCRYPTION_KEY).decrypt(token.encode()).decode()


def signature_header(*, secret: str, body: bytes, timestamp: int) -> str:
    """`t=<unix>,v1=<hex HMAC-SHA256 of "t.body">`, keyed with the whole secret
    string (prefix included), exactly as Stripe's verifiers expect."""
    signed_payload = f"{timestamp}.".encode() + body
    digest = hmac.new(secret.encode(), signed_payload, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"
