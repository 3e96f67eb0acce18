"""What a refusal means (API.md 20): one classifier for every SMTP reply and every
delivery status report, giving a `bounce_type` and a `bounce_category`.

    classify(code=550, text="5.1.1 <a@b.example>: Recipient address rejected")
        -> BounceClass(type="hard", category="user_unknown")

`type`:
- `hard`: the address will never accept (unknown user, no such domain, disabled mailbox);
- `soft`: the address exists but cannot take this message now (mailbox full, too large,
  expired after retries);
- `block`: the sender was refused, not the address (spam, policy, reputation,
  authentication, a blocklisted IP).
`rate_limited` marks a temporary refusal for rate or reputation (4.7.x): the circuit
breaker counts it with the `block` bounces.

This first form reads the enhanced status code (RFC 3463) alone; the words of the
providers and MTAs refine it.
"""

import re
from dataclasses import dataclass

HARD = "hard"
SOFT = "soft"
BLOCK = "block"

_ENHANCED = re.compile(r"\b([245])\.(\d{1,3})\.(\d{1,3})\b")


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


def classify(*, code: int | None, text: str) -> BounceClass:
    """The class of a refusal: the SMTP reply `code` (None for a report without one) and
    the server's words `text` (a report's Status and Diagnostic-Code together)."""
    status = enhanced_status(text)
    klass = status.split(".")[0] if status else (str(code)[0] if code else "5")
    subject = status.split(".", 1)[1] if status else ""
    if subject == "4.7":  # X.4.7, delivery time expired: a series of retries ended
        return BounceClass(SOFT, "expired")
    if klass == "4":
        rate = subject.startswith("7.")
        return BounceClass(SOFT, "rate_limited" if rate else "temporary", rate_limited=rate)
    if subject in ("1.1", "1.0", "1.3", "1.6", "2.1"):
        return BounceClass(HARD, "user_unknown" if subject != "2.1" else "mailbox_disabled")
    if subject in ("1.2", "4.4"):
        return BounceClass(HARD, "domain_unknown")
    if subject == "2.2":
        return BounceClass(SOFT, "mailbox_full")
    if subject in ("2.3", "3.4"):
        return BounceClass(SOFT, "message_too_large")
    if subject.startswith("7."):
        return BounceClass(BLOCK, "policy")
    return BounceClass(HARD, "undetermined")
