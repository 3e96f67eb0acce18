"""Signed tokens for the public open-pixel and unsubscribe links.

A token names one enrollment and carries an HMAC (Django's signing, keyed with
SECRET_KEY and a per-purpose salt), so it cannot be forged or enumerated. Tokens
never expire: an unsubscribe link in a years-old email must still work.
"""

import uuid

from django.core import signing

OPEN = "outreach.open"
UNSUBSCRIBE = "outreach.unsubscribe"

# "." is outside the base64url alphabet the signature uses, so it splits cleanly.
_SEPARATOR = "."


def _signer(purpose: str) -> signing.Signer:
    return signing.Signer(salt=purpose, sep=_SEPARATOR)


def token_make(*, purpose: str, enrollment_id: uuid.UUID) -> str:
    return _signer(purpose).sign(uuid.UUID(str(enrollment_id)).hex)


def token_read(*, purpose: str, token: str) -> uuid.UUID | None:
    """The enrollment id a token names, or None for a tampered or malformed token."""
    try:
        value = _signer(purpose).unsign(token)
        return uuid.UUID(hex=value)
    except (signing.BadSignature, ValueError):
        return None
