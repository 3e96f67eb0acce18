"""Dispatch confirmation tokens: a preview's numbers, signed, with an expiry.

A token is `<base64url JSON claims>.<base64url HMAC-SHA256 of that part>`, keyed with
the server's confirmation secret (OUTREACH_MCP_CONFIRMATION_SECRET, or a random one per
process). The claims bind the campaign, the selection (all pending enrollments, or a
digest of the named contact ids), the number of contacts, the mailboxes and the plan's
remaining sends the preview showed, and an expiry. Nothing is stored: any process with
the same secret can check a token.
"""

import base64
import hashlib
import hmac
import json
import secrets
import time
from typing import Any

TOKEN_TTL_SECONDS = 600


class InvalidToken(Exception):
    pass


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def selection_digest(contact_ids: list[str] | None) -> str:
    """What a dispatch names: "all_pending", or a digest of the sorted contact ids."""
    if contact_ids is None:
        return "all_pending"
    joined = ",".join(sorted(contact_ids)).encode()
    return hashlib.sha256(joined).hexdigest()


class Confirmations:
    def __init__(self, secret: str | None = None, ttl: int = TOKEN_TTL_SECONDS):
        self._key = (secret or secrets.token_urlsafe(32)).encode()
        self.ttl = ttl

    def _sign(self, body: str) -> str:
        return _b64(hmac.new(self._key, body.encode(), hashlib.sha256).digest())

    def issue(self, claims: dict[str, Any]) -> tuple[str, int]:
        """A token for these claims and its expiry (unix seconds)."""
        expires = int(time.time()) + self.ttl
        body = _b64(json.dumps({**claims, "exp": expires}, sort_keys=True).encode())
        return f"{body}.{self._sign(body)}", expires

    def check(self, token: str) -> dict[str, Any]:
        """The claims of a token this server issued and that has not expired."""
        body, _, signature = token.partition(".")
        if not hmac.compare_digest(self._sign(body), signature):
            raise InvalidToken("The confirmation token is not one this server issued.")
        try:
            claims = json.loads(_unb64(body))
        except ValueError:
            raise InvalidToken("The confirmation token is malformed.") from None
        if claims.get("exp", 0) < time.time():
            raise InvalidToken("The confirmation token has expired; preview the dispatch again.")
        return claims
