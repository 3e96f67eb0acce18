"""Whether an inbound message's From can be believed: the receiving server's
Authentication-Results header (RFC 8601) and DMARC alignment (docs/intake.md,
"Who may change state by mail").

Anyone can write any From. What the receiving mailbox server checked (SPF, DKIM,
DMARC) it writes into an Authentication-Results header that it *prepends* at delivery,
so the server's own header is the topmost one; every header further down was already in
the message when it arrived, and may have been written by the sender (RFC 8601 section
5 tells the receiving server to remove forged copies of its own; it cannot vouch for
others). So only the topmost Authentication-Results header is read, and only when it
names the mailbox server's authserv-id: a server that writes no header of its own would
otherwise leave the sender's on top. The authserv-id is the mailbox's `imap_authserv_id`,
else the one of its provider (by IMAP host: Gmail, Microsoft 365, Fastmail), else
unknown, and then no header is believed.

"Aligned" (RFC 7489): the receiving server's DMARC result is `pass`, and the domain it
evaluated (`header.from`) is the domain of the message's one From address. DMARC
authenticates a domain, not a person: it says the message came from the contact's
domain.
"""

import re
from dataclasses import dataclass
from email.message import Message as EmailMessage
from email.utils import getaddresses

HEADER = "Authentication-Results"

_FOLD = re.compile(r"\r?\n")


@dataclass(frozen=True)
class MethodResult:
    """One `method=result` of an Authentication-Results header, with its properties
    (`header.from`, `smtp.mailfrom`, ...; lower-cased names)."""

    method: str
    result: str
    properties: dict[str, str]


@dataclass(frozen=True)
class AuthenticationResults:
    authserv_id: str  # "" when the header names none (Microsoft 365 writes none)
    results: list[MethodResult]


def _without_comments(value: str) -> str:
    """The header value without its (possibly nested) comments, quoted strings kept."""
    out: list[str] = []
    depth = 0
    quoted = False
    escaped = False
    for char in value:
        if escaped:
            escaped = False
            if depth == 0:
                out.append(char)
            continue
        if char == "\\":
            escaped = True
            if depth == 0:
                out.append(char)
            continue
        if quoted:
            if char == '"':
                quoted = False
            out.append(char)
        elif char == "(":
            depth += 1
        elif char == ")" and depth:
            depth -= 1
        elif depth == 0:
            if char == '"':
                quoted = True
            out.append(char)
    return " ".join("".join(out).split())


def _split(value: str, separator: str) -> list[str]:
    """`value` split on `separator` outside quoted strings."""
    parts: list[str] = []
    current: list[str] = []
    quoted = False
    for char in value:
        if char == '"':
            quoted = not quoted
        if char == separator and not quoted:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        value = value[1:-1].replace('\\"', '"').replace("\\\\", "\\")
    return value


def _method_result(text: str) -> MethodResult | None:
    """`dmarc=pass policy.dmarc=none header.from=x.com` (comments removed)."""
    # "header.from = x.com" is legal (CFWS around "="): glue the pairs first.
    words = re.sub(r"\s*=\s*", "=", text.strip()).split(" ")
    if not words or "=" not in words[0]:
        return None
    method, _, result = words[0].partition("=")
    method = method.split("/")[0]  # a method version: "dkim/1=pass"
    properties: dict[str, str] = {}
    for word in words[1:]:
        name, equals, value = word.partition("=")
        if equals and "." in name:
            properties.setdefault(name.lower(), _unquote(value))
    return MethodResult(method.lower(), _unquote(result).lower(), properties)


def authentication_results_parse(value: str) -> AuthenticationResults:
    """One Authentication-Results header value, read leniently: an unreadable part is
    left out, never an error."""
    text = _without_comments(_FOLD.sub("", value or ""))
    parts = _split(text, ";")
    first = parts[0].strip()
    authserv_id = ""
    if first and "=" not in first.split(" ")[0]:
        # "mx.google.com" or "mx.google.com 1" (a version); Microsoft starts with a result.
        authserv_id = _unquote(first.split(" ")[0]).lower()
        parts = parts[1:]
    results = [r for r in (_method_result(p) for p in parts if p.strip()) if r is not None]
    return AuthenticationResults(authserv_id=authserv_id, results=results)


def _domain(value: str) -> str:
    return value.strip().strip(".").lower()


def authserv_id_matches(authserv_id: str, expected: str) -> bool:
    """The header's authserv-id is the mailbox server's: equal to `expected`, or a host
    under it (`messagingengine.com` names `mx6.messagingengine.com`: Fastmail's id
    changes with the MX that took the message)."""
    authserv_id, expected = _domain(authserv_id), _domain(expected)
    return bool(expected) and (authserv_id == expected or authserv_id.endswith("." + expected))


# The receiving server's authserv-id by IMAP host, for the providers whose servers add an
# Authentication-Results header to every message they take. ANY_AUTHSERV_ID: Microsoft
# writes its header with no authserv-id at all (always, topmost).
ANY_AUTHSERV_ID = "*"
PROVIDER_AUTHSERV_IDS = {
    "imap.gmail.com": "mx.google.com",
    "imap.googlemail.com": "mx.google.com",
    "outlook.office365.com": ANY_AUTHSERV_ID,
    "imap-mail.outlook.com": ANY_AUTHSERV_ID,
    "imap.fastmail.com": "messagingengine.com",
}


def mailbox_authserv_id(*, imap_authserv_id: str, imap_host: str) -> str:
    """Whose Authentication-Results a mailbox believes: its own setting, else its
    provider's, else "" (none)."""
    return imap_authserv_id or PROVIDER_AUTHSERV_IDS.get(_domain(imap_host), "")


def receiving_server_results(
    message: EmailMessage, *, authserv_id: str
) -> AuthenticationResults | None:
    """The receiving server's Authentication-Results: the topmost header, when it names
    `authserv_id` (ANY_AUTHSERV_ID: whatever it names); None otherwise, and always None
    for an unknown server ("")."""
    headers = message.get_all(HEADER) or []
    if not headers or not authserv_id:
        return None
    topmost = authentication_results_parse(str(headers[0]))
    if authserv_id != ANY_AUTHSERV_ID and not authserv_id_matches(topmost.authserv_id, authserv_id):
        return None
    return topmost


def dmarc_aligned_pass(message: EmailMessage, *, authserv_id: str) -> bool:
    """The receiving server says DMARC passed for the domain of the message's From
    (module docstring). A message with no From, or more than one address in its From
    headers, is never aligned: which one would DMARC have judged?"""
    addresses = [a for _, a in getaddresses([str(v) for v in message.get_all("From") or []]) if a]
    if len(addresses) != 1 or "@" not in addresses[0]:
        return False
    from_domain = _domain(addresses[0].rsplit("@", 1)[1])
    results = receiving_server_results(message, authserv_id=authserv_id)
    if results is None or not from_domain:
        return False
    return any(
        r.method == "dmarc"
        and r.result == "pass"
        and _domain(r.properties.get("header.from", "")) == from_domain
        for r in results.results
    )
