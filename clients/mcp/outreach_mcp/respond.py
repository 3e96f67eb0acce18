"""Responding to a reply: the preview a person confirms, and the confirmation that binds
it, each token good for one send.

A response is an email to a person, so `respond_to_reply` sends only with a token issued
for exactly that reply and that body (text and HTML). The tokens are the dispatch's
signed tokens (confirmation.py) carrying `{action, reply_id, body digest, nonce}`; what
makes one single-use is the set of spent nonces kept here, in the server's memory until
the token would have expired anyway (a token is spent once per server process).
"""

import hashlib
import secrets
import threading
import time
from typing import Any

from outreach_sdk import Client, models

from outreach_mcp.confirmation import Confirmations, InvalidToken

ACTION = "respond_to_reply"
QUOTED_LINES = 5


def body_digest(body_text: str, body_html: str | None) -> str:
    """The exact body a token confirms: its text and its HTML, byte for byte."""
    digest = hashlib.sha256()
    for part in (body_text, body_html or ""):
        encoded = part.encode()
        digest.update(len(encoded).to_bytes(8, "big") + encoded)
    return digest.hexdigest()


class ResponseConfirmations:
    """Single-use tokens that bind a response to one reply and one exact body."""

    def __init__(self, confirmations: Confirmations):
        self._confirmations = confirmations
        self._spent: dict[str, float] = {}  # nonce -> the token's expiry
        self._lock = threading.Lock()

    def issue(self, reply_id: str, body_text: str, body_html: str | None) -> tuple[str, int]:
        claims = {
            "action": ACTION,
            "reply_id": reply_id,
            "body": body_digest(body_text, body_html),
            "nonce": secrets.token_urlsafe(16),
        }
        return self._confirmations.issue(claims)

    def redeem(self, token: str, reply_id: str, body_text: str, body_html: str | None) -> bool:
        """Spend the token when it confirms this reply and this body (True); False when it
        was issued for another reply or another body (it stays unspent). InvalidToken for a
        token this server did not issue, an expired one, or one spent already."""
        claims = self._confirmations.check(token)
        nonce = claims.get("nonce")
        if claims.get("action") != ACTION or not isinstance(nonce, str):
            raise InvalidToken("The confirmation token is not one for a response to a reply.")
        if (claims.get("reply_id"), claims.get("body")) != (
            reply_id,
            body_digest(body_text, body_html),
        ):
            return False
        with self._lock:
            now = time.time()
            self._spent = {n: exp for n, exp in self._spent.items() if exp >= now}
            if nonce in self._spent:
                raise InvalidToken(
                    "The confirmation token was used already: each one sends once. Preview "
                    "the response again (call without a token) for a new one."
                )
            self._spent[nonce] = claims["exp"]
        return True


def _subject(subject: str) -> str:
    return subject if subject[:3].lower() == "re:" else f"Re: {subject}".rstrip()


def response_preview(
    client: Client, reply: models.Reply, body_text: str, body_html: str | None
) -> dict[str, Any]:
    """What a response would send, read through the API: to whom, the subject, the first
    lines of the message it answers, the mailbox it goes from, the exact body, the
    answers sent to this reply already, and what would make the service refuse it."""
    warnings = []
    mailbox = None
    if reply.credential_id is None:
        warnings.append("The mailbox that received this reply was deleted: it cannot be answered.")
    else:
        found = client.mailboxes.retrieve(reply.credential_id)
        mailbox = {
            "id": found.id,
            "from_email": found.from_email,
            "from_name": found.from_name,
            "enabled": found.disabled_at is None,
            "oauth_status": found.oauth_status,
        }
        if found.disabled_at is not None:
            warnings.append(f"The mailbox {found.from_email} is disabled: it cannot send.")
        if found.oauth_status == "reauthorization_required":
            warnings.append(f"The mailbox {found.from_email} needs re-authorization first.")
    contact = client.contacts.retrieve(reply.contact_id)
    if contact.unsubscribed_at or contact.bounced_at:
        why = "unsubscribed" if contact.unsubscribed_at else "bounced"
        warnings.append(f"The contact {why}: no email may be sent to them.")
    earlier = [
        {"id": entry.response.id, "status": entry.response.status, "at": entry.raw["at"]}
        for entry in client.campaigns.thread(reply.campaign_id, reply.enrollment_id)
        if entry.response is not None and entry.response.reply_id == reply.id
    ]
    answered = (reply.new_text or reply.text).strip().splitlines()
    return {
        "reply_id": reply.id,
        "to": reply.from_email,
        "to_name": reply.from_name,
        "subject": _subject(reply.subject),
        "from_mailbox": mailbox,
        "in_reply_to": {
            "received_at": reply.raw.get("received_at"),
            "first_lines": [f"> {line}" for line in answered[:QUOTED_LINES]],
            "more_lines": max(0, len(answered) - QUOTED_LINES),
        },
        "body_text": body_text,
        "body_html": body_html,
        "earlier_responses": earlier,
        "warnings": warnings,
    }
