"""Signed tokens for the public open-pixel and unsubscribe links.

A token carries an HMAC (Django's signing: SECRET_KEY, then each of
SECRET_KEY_FALLBACKS, with a per-purpose salt), so it cannot be forged or enumerated.
Tokens never expire: an unsubscribe link in a years-old email must still work.

What a token names:
- an open pixel: the enrollment and the position of the step whose email carries it
  (`<enrollment hex>s<position>`), so each message's first open is recorded on it
  (API.md 17); pixels sent before carry the enrollment alone (`<enrollment hex>`), and
  count for its last message sent. An open of a deleted enrollment has nothing to
  record;
- an unsubscribe link: the enrollment and its contact (`<enrollment hex><contact hex>`),
  so the link outlives its enrollment and campaign. Links sent before the contact was
  named carry the enrollment alone; a deleted enrollment's tombstone
  (outreach.models.tombstones.DeletedEnrollment) still leads them to the contact.
"""

import uuid
from dataclasses import dataclass

from django.core import signing

OPEN = "outreach.open"
UNSUBSCRIBE = "outreach.unsubscribe"

# "." is outside the base64url alphabet the signature uses, so it splits cleanly.
_SEPARATOR = "."
_HEX = 32  # characters of a UUID's hex


# Between an open pixel's enrollment and its step: outside the hex alphabet.
_STEP = "s"


@dataclass(frozen=True)
class Named:
    enrollment_id: uuid.UUID
    contact_id: uuid.UUID | None  # None in links made before contacts were named
    step: int | None = None  # an open pixel's step position; None in older pixels


def _signer(purpose: str) -> signing.Signer:
    # No key given: Django signs with SECRET_KEY and verifies with SECRET_KEY_FALLBACKS too.
    return signing.Signer(salt=purpose, sep=_SEPARATOR)


def token_make(
    *,
    purpose: str,
    enrollment_id: uuid.UUID,
    contact_id: uuid.UUID | None = None,
    step: int | None = None,
) -> str:
    value = uuid.UUID(str(enrollment_id)).hex
    if contact_id is not None:
        value += uuid.UUID(str(contact_id)).hex
    elif step is not None:
        value += f"{_STEP}{int(step)}"
    return _signer(purpose).sign(value)


def token_names(*, purpose: str, token: str) -> Named | None:
    """What a token names, or None for a tampered or malformed token."""
    try:
        value = _signer(purpose).unsign(token)
        head, _, step = value.partition(_STEP)
        if step:
            if len(head) != _HEX or not step.isdigit():
                return None
            return Named(enrollment_id=uuid.UUID(hex=head), contact_id=None, step=int(step))
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
