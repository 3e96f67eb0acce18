"""Bounces in plain words: the non-standard delivery reports real mail systems still
send, without a `message/delivery-status` part (docs/intake.md, "Delivery reports"):
qmail's "I wasn't able to deliver your message", Exim's "The following address(es)
failed", old Sendmail's "permanent fatal errors", old Exchange's "did not reach the
following recipient(s)", Gmail's and Yahoo's own texts, Postfix's "Undelivered Mail"
without a report part.

    text_report_failures(body, exclude={"sender@ours.example"})
        -> [TextFailure(recipient="bob@example.org", reason="550 5.1.1 ... user unknown",
                        final=True)]

The body is cut at the copy of the original message; the addresses left (but the
report's own From and To) are the failed recipients, each with the paragraph that names
it as its reason. A notice that says it will keep trying is a delay: `final` False.
"""

import re
from dataclasses import dataclass

_ADDRESS = re.compile(r"[\w.+'-]+@[\w-]+(?:\.[\w-]+)+", re.UNICODE)

# Where the copy of the original message begins: nothing below it is the report's.
_CUT = re.compile(
    r"^[ \t>-]*(?:below (?:this|the next) line is a copy|this is a copy of the message|original message"
    r"|the header of the original|message headers? follows?|message body (?:suppressed|follows)"
    r"|unsent message below|returned message|undelivered message|content-type: message/"
    r"|start of returned message|attachment is a copy|included is a copy|copy of the message)",
    re.IGNORECASE | re.MULTILINE,
)
_DELAY = re.compile(
    r"warning only|do not need to resend|will (?:continue|keep) (?:to )?try|will be retried"
    r"|will retry|still trying|attempts will continue|not yet been delivered|has been delayed|delivery (?:is )?delayed"
    r"|delay(?:ed)? (?:notification|warning)|delivery status notification \(delay\)",
    re.IGNORECASE,
)
_DELIVERED = re.compile(
    r"(?:was|has been|successfully) (?:successfully )?delivered|delivery (?:was )?successful",
    re.IGNORECASE,
)
_FAILED = re.compile(
    r"fail|undeliver|not (?:be )?delivered|unable|error|reject|refused|bounce", re.I
)
_DAEMONS = ("mailer-daemon@", "postmaster@", "mail-daemon@", "mailer@", "noreply@", "no-reply@")
# An address named only in the notice's boilerplate, never a failed recipient.
_BOILERPLATE = re.compile(
    r"(?:contact|write to|postmaster|assistance|administrator|send mail to).{0,40}$",
    re.IGNORECASE,
)


# A header line of the quoted original: its addresses are no recipient's failure.
_HEADER_LINE = re.compile(
    r"^[ \t>]*(?:message-id|received|references|in-reply-to|from|sender|return-path|reply-to"
    r"|errors-to|list-[\w-]+|x-[\w-]+|cc|de|para|enviado el)[ \t]*:",
    re.IGNORECASE,
)
_NEXT_RECIPIENT = re.compile(r"^[\s<\"*>\[-]*([\w.+'-]+@[\w-]+(?:\.[\w-]+)+)")
_SAYS_WHY = re.compile(r"\b[245]\d\d\b|\b[245]\.\d{1,3}\.\d{1,3}\b")


@dataclass(frozen=True)
class TextFailure:
    recipient: str
    reason: str
    final: bool


def _section(body: str) -> str:
    found = _CUT.search(body)
    return body[: found.start()] if found else body


def _paragraphs(text: str) -> list[str]:
    return [p for p in re.split(r"\n[ \t]*\n", text) if p.strip()]


def _reason_of(address: str, paragraphs: list[str], section: str) -> str:
    """The paragraph that names `address`, with the paragraphs after it (Sendmail's
    transcript, Exim's indented reply, Gmail's technical details) when it gives no
    reply code, up to the next recipient's; else the whole notice."""
    for index, paragraph in enumerate(paragraphs):
        if address not in paragraph.lower():
            continue
        if _SAYS_WHY.search(paragraph.lower().replace(address, " ")):
            return paragraph
        found = [paragraph]
        for following in paragraphs[index + 1 : index + 3]:
            starts = _NEXT_RECIPIENT.match(following)
            if starts and starts.group(1).lower() != address:
                break
            found.append(following)
        return "\n".join(found)
    return section


def text_report_failures(body: str, *, exclude: set[str]) -> list[TextFailure]:
    """The recipients a plain-text bounce notice says failed, each with its reason."""
    section = _section(body or "")
    if _DELIVERED.search(section) and not _FAILED.search(section):
        return []  # a notice of delivery
    final = _DELAY.search(section) is None
    paragraphs = _paragraphs(section)
    failures: list[TextFailure] = []
    seen = set(exclude)
    for line in section.splitlines():
        if _HEADER_LINE.match(line):
            continue
        for found in _ADDRESS.finditer(line):
            address = found.group(0).strip(".'").lower()
            if address in seen or address.startswith(_DAEMONS):
                continue
            if _BOILERPLATE.search(line[: found.start()]):
                continue
            seen.add(address)
            reason = " ".join(_reason_of(address, paragraphs, section).split())
            failures.append(TextFailure(recipient=address, reason=reason, final=final))
    return failures
