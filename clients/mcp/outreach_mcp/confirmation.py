"""Confirmations: nothing reaches people's inboxes until the user has seen exactly what
will be sent, and said yes to that.

Every tool that leads to email (dispatch_campaign, start_outreach, and any tool added
later that sends, such as answering a reply) goes through `confirmation_gate`:

    binding = Binding(
        action="respond_to_reply",       # the tool's name
        target=reply_id,                  # the campaign, or the reply, acted on
        ids=[contact_id],                 # the exact set of recipients (ids or addresses)
        extra={"body_text": body_text},   # anything else the email depends on
    )
    answer = confirmation_gate(confirmations, binding, token=confirmation_token, preview=preview)
    if answer is not None:
        return answer                     # nothing sent: the preview and a token
    ...send...                            # confirmed: the token is spent

The first call (no token) answers `status: confirmation_required` with the preview and a
`confirmation_token`; the tool is called again with the same arguments and the token.
The token binds a digest of the whole Binding: the action, the target, the exact set of
ids (not their number: two other contacts are another set), and `extra`. It is:

- signed: `<base64url JSON claims>.<base64url HMAC-SHA256>`, keyed with
  OUTREACH_MCP_CONFIRMATION_SECRET (or a random key per process);
- single-use: redeeming it records its nonce until it expires; a second call with it is
  refused (`invalid_confirmation_token`), even for the very same set;
- short-lived: TOKEN_TTL_SECONDS (10 minutes).

A token for another binding (the set or the content changed since the preview) is not an
error: the gate answers a new preview and token, and the user confirms again. Spent
nonces live in the server process: a token is single-use within the process that
redeems it. Tools whose API call takes an Idempotency-Key pass `idempotency_key(token)`
too, so the service itself sends at most once per token, whichever process redeems it.
"""

import base64
import hashlib
import hmac
import json
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

TOKEN_TTL_SECONDS = 600

__all__ = [
    "Binding",
    "ConfirmationError",
    "Confirmations",
    "InvalidToken",
    "confirmation_gate",
    "idempotency_key",
]


class ConfirmationError(Exception):
    """A tool error with an envelope-like code (the server shows `<code>: <message>`)."""

    code = "confirmation_error"

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class InvalidToken(ConfirmationError):
    code = "invalid_confirmation_token"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True)
class Binding:
    """What one confirmation allows: `action` on `target`, to exactly `ids`, with `extra`."""

    action: str
    target: str
    ids: Iterable[str]
    extra: dict[str, Any] = field(default_factory=dict)

    def digest(self) -> str:
        canonical = {
            "action": self.action,
            "target": str(self.target),
            "ids": sorted({str(i) for i in self.ids}),
            "extra": self.extra,
        }
        text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Issued:
    token: str
    expires_at: int  # unix seconds


class Confirmations:
    """Issues and redeems confirmation tokens (module docstring)."""

    def __init__(
        self,
        secret: str | None = None,
        ttl: int = TOKEN_TTL_SECONDS,
        clock: Callable[[], float] = time.time,
    ):
        self._key = (secret or secrets.token_urlsafe(32)).encode()
        self.ttl = ttl
        self._clock = clock
        self._spent: dict[str, float] = {}  # nonce -> expiry
        self._lock = threading.Lock()

    def _sign(self, body: str) -> str:
        return _b64(hmac.new(self._key, body.encode(), hashlib.sha256).digest())

    def issue(self, binding: Binding) -> Issued:
        expires = int(self._clock()) + self.ttl
        claims = {"b": binding.digest(), "n": secrets.token_urlsafe(16), "exp": expires}
        body = _b64(json.dumps(claims, sort_keys=True).encode())
        return Issued(token=f"{body}.{self._sign(body)}", expires_at=expires)

    def _claims(self, token: str) -> dict[str, Any]:
        body, _, signature = token.partition(".")
        if not hmac.compare_digest(self._sign(body), signature):
            raise InvalidToken("The confirmation token is not one this server issued.")
        try:
            claims = json.loads(_unb64(body))
        except ValueError:
            raise InvalidToken("The confirmation token is malformed.") from None
        if not isinstance(claims, dict) or claims.get("exp", 0) < self._clock():
            raise InvalidToken("The confirmation token has expired; preview again.")
        with self._lock:
            if claims.get("n") in self._spent:
                raise InvalidToken(
                    "The confirmation token was used already: each token sends once. "
                    "Preview again for a new one."
                )
        return claims

    def check(self, token: str) -> None:
        """Raises InvalidToken when the token is forged, expired or spent."""
        self._claims(token)

    def matches(self, token: str, binding: Binding) -> bool:
        """Whether the token (genuine, unexpired, unspent: InvalidToken otherwise) was
        issued for exactly this binding. Spends nothing."""
        return hmac.compare_digest(self._claims(token).get("b", ""), binding.digest())

    def redeem(self, token: str, binding: Binding) -> None:
        """Spends the token for this binding. Raises InvalidToken when it is forged,
        expired, already spent, or for another binding (check `matches` first to tell
        a changed preview apart)."""
        claims = self._claims(token)
        if not hmac.compare_digest(claims.get("b", ""), binding.digest()):
            raise InvalidToken("The confirmation token was issued for something else.")
        now = self._clock()
        with self._lock:
            for nonce in [n for n, expiry in self._spent.items() if expiry < now]:
                del self._spent[nonce]
            if claims["n"] in self._spent:
                raise InvalidToken(
                    "The confirmation token was used already: each token sends once. "
                    "Preview again for a new one."
                )
            self._spent[claims["n"]] = claims["exp"]


def idempotency_key(token: str) -> str:
    """An Idempotency-Key derived from a confirmation token: the service acts once per
    token, even when two server processes redeem it."""
    return "mcp-confirm-" + hashlib.sha256(token.encode()).hexdigest()[:40]


def confirmation_gate(
    confirmations: Confirmations,
    binding: Binding,
    *,
    token: str | None,
    preview: dict[str, Any],
    message: str = "Nothing was sent. Show this preview to the user; call again with the "
    "same arguments and this confirmation_token only once they agree.",
) -> dict[str, Any] | None:
    """None when `token` confirms exactly `binding` (it is spent now: go on and send);
    otherwise the answer the tool returns instead of sending: the preview and a token for
    it. A forged, expired or spent token raises InvalidToken (a tool error)."""
    if token is not None:
        if confirmations.matches(token, binding):
            confirmations.redeem(token, binding)
            return None
        message = (
            "Nothing was sent: what would be sent changed since the preview the token was "
            "issued for. Show this new preview to the user; call again with its token."
        )
    issued = confirmations.issue(binding)
    return {
        "status": "confirmation_required",
        "message": message,
        "preview": preview,
        "confirmation_token": issued.token,
        "expires_at": issued.expires_at,
    }
