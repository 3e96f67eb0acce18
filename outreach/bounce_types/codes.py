"""The category an enhanced status code (RFC 3463, and the codes providers added to
the IANA registry or use themselves) or a bare reply code gives, when the words gave
none."""

# Codes that say more than any words beside them (subject.detail -> category).
AUTHORITATIVE = {
    "1.7": "rejected",
    "1.8": "rejected",
    "7.23": "security_error",
    "7.25": "blocked",
    "7.26": "security_error",
    "7.27": "security_error",
    "7.509": "security_error",
    "7.515": "security_error",
}

# subject.detail (the class digit removed) -> category
_DETAIL = {
    "1.1": "user_unknown",
    "1.2": "host_unknown",
    "1.3": "user_unknown",
    "1.4": "system_error",
    "1.5": "user_unknown",
    "1.6": "has_moved",
    "1.7": "rejected",
    "1.8": "rejected",
    "1.10": "not_accept",
    "2.1": "mailbox_disabled",
    "2.2": "mailbox_full",
    "2.3": "message_too_large",
    "2.4": "system_error",
    "3.4": "message_too_large",
    "4.4": "host_unknown",
    "4.7": "expired",
    "5.3": "rate_limited",
    "7.1": "policy_violation",
    "7.25": "blocked",
    "7.28": "blocked",
    "7.13": "mailbox_disabled",
}

# subject (the first digit after the class) -> category, when the detail is not above
_SUBJECT = {
    "1": "user_unknown",
    "3": "system_error",
    "4": "network_error",
    "5": "syntax_error",
    "6": "content_error",
}

_SECURITY_DETAILS = {"2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "20", "21", "22"}
_SECURITY_DETAILS |= {"23", "24", "26", "27", "57", "509", "515"}


def category_by_status(status: str) -> str | None:
    """The category of an enhanced status code such as "5.1.1", or None when it says
    nothing more than its class (x.0.0, an unknown code)."""
    _, subject, detail = status.split(".")
    key = f"{subject}.{detail}"
    if key in _DETAIL:
        return _DETAIL[key]
    if subject == "7":
        if detail in _SECURITY_DETAILS:
            return "security_error"
        number = int(detail)
        if 500 <= number < 800:  # Microsoft's 5.7.5xx-7xx: banned or refused senders
            return "blocked"
        return "policy_violation" if detail == "0" else None
    if detail == "0":
        return _SUBJECT.get(subject) if subject in ("3", "4", "5", "6") else None
    return _SUBJECT.get(subject)


_REPLY = {
    "552": "mailbox_full",
    "452": "system_error",
    "530": "security_error",
    "535": "security_error",
    "538": "security_error",
    "500": "syntax_error",
    "501": "syntax_error",
    "502": "syntax_error",
    "503": "syntax_error",
    "504": "syntax_error",
    "571": "blocked",
}


def category_by_reply(code: int) -> str | None:
    """The category a bare SMTP reply code gives (RFC 5321), or None."""
    return _REPLY.get(str(code))
