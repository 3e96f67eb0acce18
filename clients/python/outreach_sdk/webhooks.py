"""Verify the signature of a webhook delivery, in the receiver.

    event = outreach_sdk.webhooks.verify(request.body, request.headers["X-Service-Signature"],
                                          secret="whsec_...")

The header is `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">`, keyed with the
webhook's whole secret. Pass the raw body exactly as received (bytes), not re-encoded JSON.
"""

import hashlib
import hmac
import json
import time
from typing import Any

from outreach_sdk.errors import OutreachError

HEADER = "X-Service-Signature"
DEFAULT_TOLERANCE = 300


class SignatureVerificationError(OutreachError):
    """The signature is missing, malformed, wrong, or its timestamp is too old."""

    code = "invalid_signature"


def verify(
    payload: bytes | str, header: str | None, secret: str, tolerance: int = DEFAULT_TOLERANCE
) -> dict[str, Any]:
    """The event (the parsed JSON body) if the signature verifies; raises
    SignatureVerificationError otherwise. A timestamp more than `tolerance` seconds away
    from now (either way) is refused, which bounds replays."""
    body = payload.encode() if isinstance(payload, str) else payload
    timestamp, signatures = _parse(header)
    expected = hmac.new(
        secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256
    ).hexdigest()
    # Compare every candidate (a header may carry several v1 values), each in constant time.
    if not any(hmac.compare_digest(expected, candidate) for candidate in signatures):
        raise SignatureVerificationError("The signature does not match the payload and secret.")
    if abs(_now() - timestamp) > tolerance:
        raise SignatureVerificationError(
            f"The signature's timestamp is more than {tolerance} seconds from now."
        )
    try:
        return json.loads(body)
    except ValueError:
        raise SignatureVerificationError("The signed payload is not JSON.") from None


def _now() -> float:
    return time.time()


def _parse(header: str | None) -> tuple[int, list[str]]:
    timestamp = None
    signatures = []
    for item in (header or "").split(","):
        key, _, value = item.strip().partition("=")
        if key == "t" and value.isdigit():
            timestamp = int(value)
        elif key == "v1" and value:
            signatures.append(value)
    if timestamp is None or not signatures:
        raise SignatureVerificationError(f"The {HEADER} header is missing or malformed.")
    return timestamp, signatures
