"""What a refusal means (API.md 20): one classifier for every SMTP reply and every
delivery status report, giving a `bounce_type` and a `bounce_category`.

    classify(code=550, text="5.1.1 <a@b.example>: Recipient address rejected")
        -> BounceClass(type="hard", category="user_unknown")

`type`:
- `hard`: the address will never accept (unknown user, no such domain, disabled mailbox);
- `soft`: the address exists but cannot take this message now (mailbox full, too large,
  expired after retries), and every temporary refusal (4xx): nothing bounced yet;
- `block`: the sender was refused, not the address (spam, policy, reputation,
  authentication, a blocklisted IP).
`category`: one of `CATEGORIES` (outreach.bounce_types.categories, published in
docs/sending.md), read first from the server's words (outreach.bounce_types.words), then
from the enhanced status code (RFC 3463), then from the bare reply code.
`rate_limited` marks a temporary refusal for rate or reputation (4.7.x, or words of a
rate limit or a block): the circuit breaker counts it with the `block` bounces.

A pure module: no models, no I/O.
"""

import re
from dataclasses import dataclass

from outreach.bounce_types.categories import (
    BLOCK,
    CATEGORIES,
    EXPIRED,
    HARD,
    SOFT,
    TYPES,
    UNDEFINED,
    type_of,
)
from outreach.bounce_types.codes import AUTHORITATIVE, category_by_reply, category_by_status
from outreach.bounce_types.words import category_by_words

__all__ = [
    "BLOCK",
    "CATEGORIES",
    "EXPIRED",
    "HARD",
    "SOFT",
    "TYPES",
    "UNDEFINED",
    "BounceClass",
    "classify",
    "enhanced_status",
]

_ENHANCED = re.compile(r"(?<![\d.])([245])\.(\d{1,3})\.(\d{1,3})(?![\d])")
_REPLY_CODE = re.compile(r"^\s*([245]\d\d)[\s-]")


@dataclass(frozen=True)
class BounceClass:
    type: str
    category: str
    # A temporary refusal for rate or reputation (4.7.x).
    rate_limited: bool = False


def enhanced_status(text: str) -> str | None:
    """The first enhanced status code (RFC 3463) in `text`, e.g. "5.1.1"."""
    found = _ENHANCED.search(text or "")
    return ".".join(found.groups()) if found else None


def _temporary(code: int | None, status: str | None, text: str) -> bool:
    if status:
        return status.startswith("4")
    if code:
        return str(code).startswith("4")
    found = _REPLY_CODE.search(text)
    return bool(found and found.group(1).startswith("4"))


def classify(*, code: int | None, text: str) -> BounceClass:
    """The class of a refusal: the SMTP reply `code` (None for a report without one) and
    the server's words `text` (a report's Status and Diagnostic-Code together)."""
    words = " ".join((text or "").split()).lower()
    status = enhanced_status(words)
    if code is None:
        found = _REPLY_CODE.search(words)
        code = int(found.group(1)) if found else None
    category = (
        (AUTHORITATIVE.get(status.split(".", 1)[1]) if status else None)
        or category_by_words(words)
        or (category_by_status(status) if status else None)
        or (category_by_reply(code) if code else None)
        or UNDEFINED
    )
    if _temporary(code, status, words):
        # Greylisting's 451 4.7.1 is the first answer every new sender gets, not a
        # verdict on this one: not a strike for the circuit breaker.
        rate = category != "greylisted" and (
            bool(status and status.startswith("4.7.")) or category in ("rate_limited", "blocked")
        )
        return BounceClass(SOFT, category, rate_limited=rate)
    return BounceClass(type_of(category), category)
