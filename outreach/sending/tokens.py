"""Signed tokens for the public open-pixel and unsubscribe links.

A token carries an HMAC (Django's signing: SECRET_KEY, then each of
SECRET_KEY_FALLBACKS, with a per-purpose salt), so it cannot be forged or enumerated.
Tokens never expire: an unsubscribe link in a years-old email must still work.

What a token names:
- an open pixel: the enrollment (`<enrollment hex>`); an open of a deleted enrollment
  has nothing to record;
- an unsubscribe link: the enrollment and its contact (`<enrollment hex><contact hex>`),
  so the link outlives its enrollment and campaign. Links sent before the contact was
  named carry the enrollment alone; a deleted enrollment's tombstone
  (outreach.models.sending.DeletedEnrollment) still leads them to the contact.
"""

import uuid
from dataclasses import dataclass

from django.core import signing

OPEN = "outreach.open"
UNSUBSCRIBE = "outreach.unsubscribe"

# "." is outside the base64url alphabet the signature uses, so it splits cleanly.
_SEPARATOR = "."
_HEX = 32  # characters of a UUID's hex


@dataclass(frozen=True)
class Named:
    enrollment_id: uuid.UUID
    contact_id: uuid.UUID | None  # None in links made before contacts were named


def _signer(purpose: str) -> signing.Signer:
    # No key given: Django signs with SECRET_KEY and verifies with SECRET_KEY_FALLBACKS too.
    return signing.Signer(salt=purpose, sep=_SEPARATOR)


def token_make(
    *, purpose: str, enrollment_id: uuid.UUID, contact_id: uuid.UUID | None = None
) -> str:
    value = uuid.UUID(str(enrollment_id)).hex
    if contact_id is not None:
        value += uuid.UUID(str(contact_id)).hex
    return _signer(purpose).sign(value)


def token_names(*, purpose: str, token: str) -> Named | None:
    """What a token names, or None for a tampered or malformed token."""
    try:
        value = _signer(purpose).unsign(token)
        if len(value) not in (_HEX, 2 * _HEX):
            return None
        contact = uuid.UUID(hex=value[_HEX:]) if len(value) > _HEX else None
        return Named(enrollment_id=uuid.UUID(hex=value[:_HEX]), contact_id=contact)
    except (signing.BadSignature, ValueError):
        return None


def token_read(*, purpose: str, token: str) -> uuid.UUID | None:
    """The enrollment id a token names, or None for a tampered or malformed token."""
    named = token_names(purpose=purpose, token=token)
    return named.enrollment_id if named else None
