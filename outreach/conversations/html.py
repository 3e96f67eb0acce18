"""HTML of inbound messages: sanitizing it for display, and a readable text rendering
of it (with or without the quoted earlier message). Pure functions, no database.

Sanitizing: `html` goes through nh3 (the ammonia sanitizer): an allow-list of
formatting tags and attributes; no script, style (elements or attributes, so no CSS
`url()`), event handlers, forms, iframes, objects or images (which would load remote
content or track the reader); links keep only http, https, mailto and tel URLs and
get `rel="noopener noreferrer nofollow"`.

The text rendering (the `text` of an HTML-only message): paragraphs, line breaks, list
items, `text (url)` links, blockquotes as `> ` lines; with `cut`, it stops at the
client's mark of a quoted earlier message or signature (`QUOTE_CLASSES`,
`SIGNATURE_CLASSES`, `QUOTE_STOP_IDS`).

Bounds (hostile markup must not stall a poll). The standard library's html.parser takes
quadratic time on some malformed input (`</`, `<!--`, `<?` or `<a` repeated: 50 s for
300 KB), so it is not used: the rendering reads html5ever's rewrite of the HTML (through
nh3, linear), whose tags are well-formed and whose text is escaped, with a tokenizer of
its own (one regular expression, linear). html5ever in turn takes time in the depth of
the elements open at once times the tags (6 s for 300 KB of `<div>`), so nh3 is never
handed more than `MAX_HTML_DEPTH` nested elements: a start tag deeper than that is
dropped, its text kept (`html_depth_bounded`).
"""

import re
from html import unescape as html_unescape

import nh3


def newlines_normalize(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


_SANITIZER = nh3.Cleaner(
    tags=set(nh3.ALLOWED_TAGS) - {"img", "map", "area"},
    clean_content_tags={
        "script",
        "style",
        "title",
        "noscript",
        "template",
        "textarea",
        "select",
        "button",
        "iframe",
        "object",
        "embed",
        "svg",
        "math",
        "head",
    },  # fmt: skip
    attributes={
        tag: set(attrs)
        for tag, attrs in nh3.ALLOWED_ATTRIBUTES.items()
        if tag not in ("img", "map", "area")
    },
    link_rel="noopener noreferrer nofollow",
    url_schemes={"http", "https", "mailto", "tel"},
    strip_comments=True,
)


def html_sanitize(html: str) -> str:
    """HTML safe to show: formatting and links only (see the module docstring)."""
    return _SANITIZER.clean(html_depth_bounded(html))


def html_sanitize_bounded(html: str, max_chars: int) -> tuple[str, bool]:
    """The sanitized HTML within max_chars: the longest prefix of the input (found by
    bisection, so a few sanitizer runs whatever the markup) whose sanitized form fits,
    so the result is always well-formed."""
    html = html_depth_bounded(html)
    clean = _SANITIZER.clean(html)
    if len(clean) <= max_chars:
        return clean, False
    best, fits, fails = "", 0, len(html)  # html[:fits] fits, html[:fails] does not
    budget = min(len(html) * max_chars // len(clean), fails - 1)  # first guess: the ratio
    while fails - fits > 1:
        clean = _SANITIZER.clean(html[:budget])
        if len(clean) <= max_chars:
            best, fits = clean, budget
        else:
            fails = budget
        budget = (fits + fails) // 2
    return best, True


# Elements html5ever never nests in themselves (an open one is closed by the next), and
# void elements: they add no depth.
_FLAT_TAGS = {
    "p", "li", "dt", "dd", "tr", "td", "th", "option", "optgroup", "rb", "rt", "rp", "rtc",
    "thead", "tbody", "tfoot", "colgroup", "caption",
}  # fmt: skip
MAX_HTML_DEPTH = 100
# A tag as far as depth goes: possessive, so a `<` without its `>` costs one scan to the
# next `<`, never a backtrack.
_TAG = re.compile(r"<(/?)([A-Za-z][^\s/<>]*+)[^<>]*+>")


def html_depth_bounded(html: str) -> str:
    """`html` with every start tag that would open an element deeper than MAX_HTML_DEPTH
    dropped (its content stays). One linear pass over the tags: an end tag closes the
    innermost open element of its name and those inside it; unmatched end tags, void
    elements and those html5ever never nests (`_FLAT_TAGS`) change nothing."""
    open_tags: list[str] = []
    kept: list[str] = []
    last = 0
    for tag in _TAG.finditer(html):
        closing, name = tag.group(1), tag.group(2).lower()
        if closing:
            for at in range(len(open_tags) - 1, -1, -1):
                if open_tags[at] == name:
                    del open_tags[at:]
                    break
        elif name in _VOID_TAGS or name in _FLAT_TAGS or tag.group(0).endswith("/>"):
            continue
        elif len(open_tags) < MAX_HTML_DEPTH:
            open_tags.append(name)
        else:
            kept.append(html[last : tag.start()])
            last = tag.end()
    if not kept:
        return html
    kept.append(html[last:])
    return "".join(kept)


_BLOCK_TAGS = {
    "address", "article", "aside", "center", "dd", "div", "dl", "dt", "footer", "form",
    "header", "section", "table", "tr", "ul", "ol", "nav", "figure", "figcaption",
}  # fmt: skip
_PARAGRAPH_TAGS = {"p", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "hr"}
_HIDDEN_TAGS = {
    "script", "style", "head", "title", "noscript", "template", "svg", "math", "button",
    "select", "textarea", "iframe", "object",
}  # fmt: skip
_VOID_TAGS = {
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
    "track", "wbr",
}  # fmt: skip
# The HTML marks of a quoted earlier message (and of signatures), per client.
QUOTE_CLASSES = {"gmail_quote", "gmail_quote_container", "yahoo_quoted", "moz-cite-prefix"}
SIGNATURE_CLASSES = {"gmail_signature", "moz-signature"}
QUOTE_STOP_IDS = {"divrplyfwdmsg", "appendonsend", "mail-editor-reference-message-container"}


# A token of html5ever's serialization: a start or end tag (attributes as `name="value"`,
# `>` and `<` escaped in values) or text (`<` escaped).
_TOKEN = re.compile(r"<(/?)([A-Za-z][^\s/>]*)([^>]*)>|([^<]+)")
_ATTRIBUTE = re.compile(r'([^\s="]+)(?:="([^"]*)")?')


class _TextRenderer:
    """A readable text rendering of HTML; with `cut`, without the quoted earlier message."""

    def __init__(self, *, cut: bool, max_chars: int | None) -> None:
        self.cut = cut
        self.max_chars = max_chars
        self.size = 0  # characters rendered so far
        self.found_quote = False
        self.lines: list[tuple[int, str]] = []
        self.current: list[str] = []
        self.depth = 0  # blockquote nesting
        self.pre = 0
        self.skip_tag = ""
        self.skip_nesting = 0
        self.stopped = False
        self.lists: list[list[int]] = []  # per open list: [next number] (ol) or [] (ul)
        self.links: list[tuple[str, int, int]] = []

    def read(self, serialized: str) -> None:
        """Read html5ever's serialization of a document (`_RENDER_INPUT`)."""
        for token in _TOKEN.finditer(serialized):
            if self.max_chars is not None and self.size > self.max_chars:
                break  # the rest would be cut anyway
            closing, tag, attributes, data = token.groups()
            if data is not None:
                self.handle_data(html_unescape(data))
            elif closing:
                self.handle_endtag(tag.lower())
            else:
                self.handle_starttag(
                    tag.lower(),
                    [
                        (name.lower(), None if value is None else html_unescape(value))
                        for name, value in _ATTRIBUTE.findall(attributes)
                    ],
                )

    def newline(self, blank: bool = False, *, always: bool = False) -> None:
        """End the current line (an empty one only for `always`: a <br>); with `blank`,
        leave a blank line after it (a paragraph)."""
        line = "".join(self.current)
        if not self.pre:
            line = " ".join(line.split())
        if line.strip() or always:
            self.lines.append((self.depth, line.rstrip()))
            self.size += len(line) + self.depth + 1
        self.current = []
        if blank:
            self.lines.append((self.depth, ""))

    def start_skip(self, tag: str) -> None:
        self.skip_tag = tag
        self.skip_nesting = 1

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.stopped:
            return
        if self.skip_nesting:
            if tag == self.skip_tag and tag not in _VOID_TAGS:
                self.skip_nesting += 1
            return
        if tag in _HIDDEN_TAGS:
            self.start_skip(tag)
            return
        if self.cut and tag not in _VOID_TAGS:
            values = {name: (value or "") for name, value in attrs}
            classes = set(values.get("class", "").lower().split())
            if values.get("id", "").lower() in QUOTE_STOP_IDS:
                self.found_quote = True
                self.stopped = True
                return
            if (
                classes & QUOTE_CLASSES
                or (tag == "blockquote" and values.get("type", "").lower() == "cite")
                or classes & SIGNATURE_CLASSES
            ):
                self.found_quote = self.found_quote or not classes & SIGNATURE_CLASSES
                self.start_skip(tag)
                return
        if tag == "br":
            self.newline(always=True)
        elif tag in _PARAGRAPH_TAGS:
            self.newline(blank=True)
            if tag == "pre":
                self.pre += 1
        elif tag == "blockquote":
            self.newline(blank=True)
            self.depth += 1
        elif tag == "li":
            self.newline()
            numbers = self.lists[-1] if self.lists else []
            if numbers:
                self.current.append(f"{numbers[0]}. ")
                numbers[0] += 1
            else:
                self.current.append("- ")
        elif tag in ("ul", "ol"):
            self.newline(blank=not self.lists)
            self.lists.append([1] if tag == "ol" else [])
        elif tag in _BLOCK_TAGS:
            self.newline()
        elif tag in ("td", "th"):
            self.current.append(" ")
        elif tag == "a":
            href = dict(attrs).get("href") or ""
            self.links.append((href.strip(), len(self.lines), len(self.current)))

    def handle_endtag(self, tag: str) -> None:
        if self.stopped:
            return
        if self.skip_nesting:
            if tag == self.skip_tag:
                self.skip_nesting -= 1
            return
        if tag in _PARAGRAPH_TAGS:
            if tag == "pre" and self.pre:
                self.pre -= 1
            self.newline(blank=True)
        elif tag == "blockquote":
            self.newline(blank=True)
            self.depth = max(0, self.depth - 1)
        elif tag in ("ul", "ol"):
            if self.lists:
                self.lists.pop()
            self.newline(blank=not self.lists)
        elif tag in _BLOCK_TAGS or tag == "li":
            self.newline()
        elif tag == "a" and self.links:
            href, line_at, chunk_at = self.links.pop()
            shown = "".join(self.current[chunk_at:]) if line_at == len(self.lines) else ""
            if href.lower().startswith(("http://", "https://")) and href not in shown:
                self.current.append(f" ({href})")

    def handle_data(self, data: str) -> None:
        if self.stopped or self.skip_nesting:
            return
        data = data.replace("\xa0", " ")
        if self.pre:
            parts = data.split("\n")
            for i, chunk in enumerate(parts):
                if i:
                    self.newline()
                self.current.append(chunk)
        else:
            self.current.append(re.sub(r"\s+", " ", data))

    def rendered(self) -> str:
        self.newline()
        out: list[str] = []
        for depth, line in self.lines:
            line = line.rstrip()
            if not line and (not out or not out[-1].lstrip("> ")):
                continue  # no leading or repeated blank lines
            out.append(((">" * depth + " ") if depth else "") + line)
        while out and not out[-1].lstrip("> "):
            out.pop()
        return "\n".join(out)


# What the text rendering reads: html5ever's well-formed rewrite of the message's HTML,
# with every tag and attribute the rendering looks at (the module docstring, "Bounds").
_RENDER_INPUT = nh3.Cleaner(
    tags=(set(nh3.ALLOWED_TAGS) | _BLOCK_TAGS | _PARAGRAPH_TAGS | {"font"}) - _HIDDEN_TAGS,
    clean_content_tags=_HIDDEN_TAGS | {"head"},
    attributes={"*": {"class", "id"}, "blockquote": {"type"}, "a": {"href"}},
    url_schemes={"http", "https", "mailto", "tel"},
    link_rel=None,
    strip_comments=True,
)


def html_render(html: str, *, cut: bool, max_chars: int | None = None) -> tuple[str, bool]:
    """The text rendering of `html` (the module docstring), and whether a quoted earlier
    message was cut (with `cut`). With `max_chars`, reading stops once that much text is
    rendered (the caller cuts there anyway)."""
    renderer = _TextRenderer(cut=cut, max_chars=max_chars)
    try:
        renderer.read(_RENDER_INPUT.clean(html_depth_bounded(html)))
    except Exception:
        # A last resort (nothing known raises): the text nh3 leaves of the markup.
        plain = nh3.clean(html, tags=set(), clean_content_tags=set(_HIDDEN_TAGS))
        return newlines_normalize(html_unescape(plain)).strip(), False
    return renderer.rendered(), renderer.found_quote


def html_to_text(html: str, max_chars: int | None = None) -> str:
    """A readable text rendering of an HTML body (see the module docstring)."""
    return html_render(html, cut=False, max_chars=max_chars)[0]
