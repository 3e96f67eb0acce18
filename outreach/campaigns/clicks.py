"""Click tracking (campaign `track_clicks`, docs/deliverability.md): the links of a
message are rewritten to the signed redirect `GET /t/c/<token>`, whose token names the
enrollment, the step and A/B variant of the message, and the exact target URL.

- HTML bodies are read with a real HTML parser (the standard library's `html.parser`):
  the `href` of each `<a>` and `<area>` whose target is an `http(s)` URL is replaced,
  the rest of the document is left byte for byte as it was. Links in comments, scripts
  or attribute values other than `href` are not links and stay as they are.
- Text bodies: each bare `http(s)://` URL is replaced (trailing punctuation of the
  sentence and an unbalanced closing bracket stay outside the URL).
- Never rewritten: the contact's unsubscribe link (the caller names it in `keep`), and
  anything that is not an absolute `http` or `https` URL (`mailto:`, `tel:`, `#top`,
  relative paths).

The token is a Django signature (SECRET_KEY, then SECRET_KEY_FALLBACKS, with a salt of
its own): the redirect goes only to the URL the token carries, so it cannot be turned
into an open redirect, and a token changed by one character is refused.
"""

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from html import escape
from html.parser import HTMLParser
from urllib.parse import urlsplit

from django.core import signing

CLICK = "outreach.click"
_LINK_TAGS = ("a", "area")
# A bare URL in text: up to the first whitespace or a character a URL cannot hold bare.
_BARE_URL = re.compile(r"\bhttps?://[^\s<>\"'`]+", re.IGNORECASE)
_TRAILING = ".,;:!?'\""
_CLOSING = {")": "(", "]": "[", "}": "{"}


@dataclass(frozen=True)
class ClickTarget:
    """What a click token names."""

    enrollment_id: uuid.UUID
    step: int
    variant: str
    url: str


def _signer() -> signing.Signer:
    return signing.Signer(salt=CLICK, sep=".")


def click_token_make(*, enrollment_id: uuid.UUID, step: int, variant: str, url: str) -> str:
    """The token of one link of one message."""
    value = [uuid.UUID(str(enrollment_id)).hex, step, variant, url]
    return _signer().sign_object(value, compress=True)


def click_token_read(token: str) -> ClickTarget | None:
    """What a token names, or None for a tampered or malformed one."""
    try:
        enrollment_hex, step, variant, url = _signer().unsign_object(token)
        target = ClickTarget(
            enrollment_id=uuid.UUID(hex=enrollment_hex), step=step, variant=variant, url=url
        )
    except (signing.BadSignature, ValueError, TypeError):
        return None
    if not (
        isinstance(step, int)
        and isinstance(variant, str)
        and len(variant) == 1
        and isinstance(url, str)
        and trackable(url)
    ):
        return None
    return target


def trackable(url: str) -> bool:
    """Whether a link's target is one a click redirect may lead to: an absolute http or
    https URL with a host."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return parts.scheme.lower() in ("http", "https") and bool(parts.hostname)


# --- rewriting ----------------------------------------------------------------------------


LinkFor = Callable[[str], str]


class _LinkFinder(HTMLParser):
    """Collects ((line, column), name, raw tag text, attributes) of each link tag."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[tuple[int, int], str, str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _LINK_TAGS:
            self.tags.append((self.getpos(), tag, self.get_starttag_text() or "", attrs))


def _tag(name: str, attrs: list[tuple[str, str | None]], raw: str) -> str:
    """A start tag written from its parsed attributes."""
    parts = [f"<{name}"]
    for attr, value in attrs:
        parts.append(f" {attr}" if value is None else f' {attr}="{escape(value, quote=True)}"')
    parts.append(" />" if raw.rstrip().endswith("/>") else ">")
    return "".join(parts)


def html_links_track(html: str, *, link_for: LinkFor, keep: frozenset[str]) -> str:
    """`html` with the `href` of each trackable link replaced by `link_for(url)`; the
    URLs in `keep` (the unsubscribe link) stay."""
    finder = _LinkFinder()
    finder.feed(html)
    finder.close()
    if not finder.tags:
        return html
    line_starts = [0]
    for index, char in enumerate(html):
        if char == "\n":
            line_starts.append(index + 1)
    out: list[str] = []
    done = 0
    for (line, column), name, raw, attrs in finder.tags:
        start = line_starts[line - 1] + column
        if start < done or html[start : start + len(raw)] != raw:
            continue  # not where the parser says: leave it as it is
        hrefs = [value for attr, value in attrs if attr == "href"]
        url = (hrefs[0] or "").strip() if hrefs else ""
        if not url or url in keep or not trackable(url):
            continue
        rewritten = [(attr, link_for(url) if attr == "href" else value) for attr, value in attrs]
        out.append(html[done:start])
        out.append(_tag(name, rewritten, raw))
        done = start + len(raw)
    out.append(html[done:])
    return "".join(out)


def _bare_url_end(url: str) -> str:
    """The URL without what follows it in a sentence: trailing punctuation, and a closing
    bracket it does not open."""
    while url:
        last = url[-1]
        unopened = last in _CLOSING and url.count(_CLOSING[last]) < url.count(last)
        if last in _TRAILING or unopened:
            url = url[:-1]
        else:
            break
    return url


def text_links_track(text: str, *, link_for: LinkFor, keep: frozenset[str]) -> str:
    """`text` with each bare trackable URL replaced by `link_for(url)`; the URLs in
    `keep` stay."""

    def replace(match: re.Match) -> str:
        found = match.group(0)
        url = _bare_url_end(found)
        if url in keep or not trackable(url):
            return found
        return link_for(url) + found[len(url) :]

    return _BARE_URL.sub(replace, text)
