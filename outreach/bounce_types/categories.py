"""The published list of bounce categories and the type of each (docs/sending.md, "Bounce
types"). Modelled on Sisimai's reason taxonomy; the names are ours.

A permanent refusal takes its category's type. A temporary refusal (4xx) keeps its
category (what the server said) but is always `soft`: nothing has bounced yet.
"""

HARD = "hard"
SOFT = "soft"
BLOCK = "block"
TYPES = (HARD, SOFT, BLOCK)

# category: (type, what it means)
CATEGORIES: dict[str, tuple[str, str]] = {
    # The address will never accept.
    "user_unknown": (HARD, "no such mailbox at the recipient's domain"),
    "host_unknown": (HARD, "the recipient's domain does not exist or has no route"),
    "mailbox_disabled": (HARD, "the mailbox exists but is disabled, suspended or closed"),
    "has_moved": (HARD, "the recipient has moved to another address"),
    "not_accept": (HARD, "the recipient's domain accepts no mail (null MX, no SMTP service)"),
    # The address exists but cannot take this message now.
    "mailbox_full": (SOFT, "the mailbox is over its quota"),
    "message_too_large": (SOFT, "the message exceeds a size or per-message limit"),
    "expired": (SOFT, "delivery was retried until the time ran out"),
    "network_error": (SOFT, "no connection or a routing loop to the recipient's server"),
    "system_error": (SOFT, "the recipient's server failed or is misconfigured"),
    "syntax_error": (SOFT, "an SMTP protocol error between the two servers"),
    "greylisted": (SOFT, "a greylisting server asks a new sender to try again later"),
    # The sender was refused, not the address.
    "blocked": (BLOCK, "the sending IP or host is blocked (blocklist, reputation, rDNS)"),
    "rejected": (BLOCK, "the envelope sender (MAIL FROM) or its domain is refused"),
    "security_error": (BLOCK, "authentication failed: SPF, DKIM, DMARC, TLS or login"),
    "spam_detected": (BLOCK, "the message was judged spam"),
    "virus_detected": (BLOCK, "the message was judged to carry malware"),
    "policy_violation": (BLOCK, "the message breaks the recipient's policy"),
    "content_error": (BLOCK, "the message's content or headers were refused"),
    "filtered": (BLOCK, "the recipient (or its filter) refuses mail from this sender"),
    "rate_limited": (BLOCK, "too many messages or connections from this sender"),
    "no_relaying": (BLOCK, "the server will not relay this mail for the sender"),
    # Nothing told us more: a permanent refusal stops mail to the address.
    "undefined": (HARD, "a refusal whose code and words say nothing more"),
}

# The category of a relay provider's event, or of a series of retries that ran out.
EXPIRED = "expired"
UNDEFINED = "undefined"


def type_of(category: str) -> str:
    return CATEGORIES[category][0]
