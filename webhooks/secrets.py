"""Webhook signing secrets: made, and used to sign.

The secret has to be recoverable to sign each delivery, so it is stored
encrypted (Webhook.secret, an EncryptedTextField) rather than hashed.
"""

import hashlib
import hmac
import secrets

__all__ = ["secret_generate", "signature_header"]

SECRET_PREFIX = "whsec_"  # noqa: S105 (a prefix, not a secret)


def secret_generate() -> str:
    """`whsec_` and 32 random bytes, URL-safe base64 (43 characters)."""
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def signature_header(*, secret: str, body: bytes, timestamp: int) -> str:
    """`t=<unix>,v1=<hex HMAC-SHA256 of "t.body">`, keyed with the whole secret
    string (prefix included), exactly as Stripe's verifiers expect."""
    signed_payload = f"{timestamp}.".encode() + body
    digest = hmac.new(secret.encode(), signed_payload, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"
