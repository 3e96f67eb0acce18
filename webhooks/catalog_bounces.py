"""What `enrollment.bounced` adds to an enrollment's state (webhooks.catalog): the
bounce's type and category (docs/sending.md, "Bounce types")."""

BOUNCE_PROPERTIES = {
    "bounce_type": {
        "type": ["string", "null"],
        "enum": ["hard", "soft", "block", None],
        "description": "hard: the address will never accept (the contact is suppressed); "
        "soft: it cannot take this message now; block: the sender was refused, not the "
        'address (docs/sending.md, "Bounce types").',
    },
    "bounce_category": {
        "type": ["string", "null"],
        "description": 'Why, from the published list (docs/sending.md, "Bounce types"), '
        "e.g. user_unknown, mailbox_full, blocked.",
    },
}

BOUNCE_EXAMPLE = {
    "bounce_reason": "550 5.1.1 mailbox unavailable",
    "bounce_type": "hard",
    "bounce_category": "user_unknown",
}
