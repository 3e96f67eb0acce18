"""Email address validation shared by the API, imports and outreaches."""

import re
from functools import lru_cache

from email_validator import EmailNotValidError, validate_email
from email_validator.rfc_constants import CASE_INSENSITIVE_MAILBOX_NAMES


class InvalidEmail(ValueError):
    pass


# RFC 5322 dot-atom: the local part of nearly every real address. For such a local
# part the library's verdict and normal form depend on the domain alone (and the
# lengths), so an import of many addresses at few domains checks each domain once.
_ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_DOT_ATOM = re.compile(rf"{_ATOM}(?:\.{_ATOM})*")
_LOCAL_MAX = 64
_ADDRESS_MAX = 254

# The mailbox simulator's addresses (docs/sandbox.md): RFC 2606 reserves `.test`, so no
# real server is ever asked for one. The outcome is what follows a `+` in the local part.
SIMULATOR_DOMAIN = "simulator.test"
SIMULATOR_OUTCOMES = (
    "delivered",
    "open",
    "click",
    "reply",
    "ooo",
    "autoreply",
    "remove",
    "bounce",
    "softbounce",
    "dsn",
    "block",
    "complaint",
    "unknown",
)


def simulator_address(email: str) -> bool:
    """Whether the address is the mailbox simulator's (any local part)."""
    return email.rpartition("@")[2].lower() == SIMULATOR_DOMAIN


def simulator_outcome(email: str) -> str | None:
    """The simulator's outcome for an address: the word after the last `+` of its local
    part when it is one of SIMULATOR_OUTCOMES, else `delivered`; None for an address
    that is not the simulator's."""
    local, _, domain = email.rpartition("@")
    if domain.lower() != SIMULATOR_DOMAIN:
        return None
    tag = local.rpartition("+")[2].lower() if "+" in local else ""
    return tag if tag in SIMULATOR_OUTCOMES else "delivered"


def email_clean(value: object) -> str:
    """The address, syntax-checked (no DNS lookup) with its domain normalised to lower
    case and internationalised domains to their Unicode form; InvalidEmail otherwise."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidEmail("An email address is required.")
    value = value.strip()
    local, at, domain = value.rpartition("@")
    if at and len(local) <= _LOCAL_MAX and _DOT_ATOM.fullmatch(local):
        normalized_domain = _domain_clean(domain)
        if normalized_domain is not None and len(local) + 1 + len(normalized_domain) <= (
            _ADDRESS_MAX
        ):
            if local.lower() in CASE_INSENSITIVE_MAILBOX_NAMES:
                local = local.lower()  # RFC 2142's role mailboxes (Postmaster, NOC, ...)
            return f"{local}@{normalized_domain}"
    # Anything else (quoted or international local parts, refused domains, lengths): the
    # library decides, and words the refusal.
    try:
        result = validate_email(value, check_deliverability=False)
    except EmailNotValidError as exc:
        raise InvalidEmail(str(exc)) from None
    if len(result.normalized) > _ADDRESS_MAX:
        raise InvalidEmail("The email address is longer than 254 characters.")
    return result.normalized


@lru_cache(maxsize=4096)
def _domain_clean(domain: str) -> str | None:
    """The domain in its normal form, as the library gives it, or None if it refuses it.
    The simulator's domain is taken as it is (the library refuses special-use names)."""
    if domain.lower() == SIMULATOR_DOMAIN:
        return SIMULATOR_DOMAIN
    try:
        return validate_email(f"a@{domain}", check_deliverability=False).domain
    except EmailNotValidError:
        return None
