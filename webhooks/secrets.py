"""Webhook signing secrets: made, and used to sign.

The secret has to be recoverable to sign each delivery, so it is stored
encrypted (Webhook.secret, an EncryptedTextField) rather than hashed.

Two signatures go with every delivery (docs/webhooks.md, "Verifying the signature"):

- `X-Service-Signature` (SPEC.md §6): `t=<unix>,v1=<hex HMAC-SHA256 of "t.body">`,
  keyed with the whole secret string, `whsec_` included (Stripe's scheme).
- Standard Webhooks (`webhook-id`, `webhook-timestamp`, `webhook-signature`):
  `v1,<base64 HMAC-SHA256 of "id.t.body">`, keyed with the bytes the secret's
  base64 part decodes to, as the Standard Webhooks libraries (and Svix's) read it.

Secrets are `whsec_` and 32 random bytes in standard base64, which both schemes
read. Secrets made before (`whsec_` and URL-safe base64) still sign both headers:
their key bytes are decoded from the URL-safe alphabet, which the libraries do not
read, so a receiver on one of them needs a rotated secret.
"""

import base64
import binascii
import hashlib
import hmac
import secrets

__all__ = [
    "secret_generate",
    "signature_header",
    "standard_signature_header",
    "standard_webhooks_key",
]

SECRET_PREFIX = "whsec_"  # noqa: S105 (a prefix, not a secret)
SECRET_BYTES = 32


def secret_generate() -> str:
    """`whsec_` and 32 random bytes in standard base64 (44 characters, one `=`)."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def signature_header(*, secret: str, body: bytes, timestamp: int) -> str:
    """`t=<unix>,v1=<hex HMAC-SHA256 of "t.body">`, keyed with the whole secret
    string (prefix included), exactly as Stripe's verifiers expect."""
    signed_payload = f"{timestamp}.".encode() + body
    digest = hmac.new(secret.encode(), signed_payload, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


def standard_webhooks_key(secret: str) -> bytes:
    """The HMAC key of the Standard Webhooks signature: the secret's base64 part,
    decoded (standard alphabet; a secret made before in the URL-safe one, by it).
    Never raises."""
    encoded = secret.removeprefix(SECRET_PREFIX)
    padded = encoded + "=" * (-len(encoded) % 4)
    try:
        return base64.b64decode(padded, validate=True)
    except binascii.Error:
        pass
    try:
        return base64.urlsafe_b64decode(padded)
    except (binascii.Error, ValueError):
        # Not base64 at all (no secret the service makes): its text, so signing never fails.
        return encoded.encode()


def standard_signature_header(*, secret: str, message_id: str, body: bytes, timestamp: int) -> str:
    """`v1,<base64 HMAC-SHA256 of "<webhook-id>.<webhook-timestamp>.<body>">`."""
    signed_payload = f"{message_id}.{timestamp}.".encode() + body
    digest = hmac.new(standard_webhooks_key(secret), signed_payload, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()
