"""Reading an inbound message: raw bytes in, what a person reads out.

`message_parse(raw, max_chars=...)` never raises, whatever the bytes: what is malformed
is kept as far as it can be read and named in `defects`.

Decoding
- The MIME tree is walked without descending into attached messages (message/rfc822
  is an attachment). The body is the inline text/plain and text/html leaves (no
  filename, not `Content-Disposition: attachment`), in order; every other leaf is an
  attachment (filename decoded, RFC 2231 and RFC 2047; content type; decoded size),
  listed and never kept.
- Charsets: the declared one, read as mail clients read it (ISO-8859-1 and US-ASCII as
  Windows-1252, GB2312 as GB18030, ISO-2022-JP with its common extensions, ...); when
  it is missing, unknown or wrong (the bytes do not decode), UTF-8, then Windows-1252,
  then ISO-8859-1, which decodes anything. Headers likewise, RFC 2047 words included
  (display names too), and raw 8-bit headers as UTF-8 or Windows-1252.
- format=flowed text (RFC 3676, with DelSp) is joined back into its paragraphs.
- An HTML-only message gets a text rendering of its HTML (paragraphs, line breaks,
  list items, `text (url)` links, blockquotes as `> ` lines) made with the standard
  library's html.parser.

Sanitizing: `html` goes through nh3 (the ammonia sanitizer): an allow-list of
formatting tags and attributes; no script, style (elements or attributes, so no CSS
`url()`), event handlers, forms, iframes, objects or images (which would load remote
content or track the reader); links keep only http, https, mailto and tel URLs and
get `rel="noopener noreferrer nofollow"`.

Bounds: `text`, `new_text` and `html` are each at most `max_chars` characters;
`truncated` says one was cut. The HTML is cut before it is sanitized, so what is
stored is well-formed. The caller bounds the bytes it hands over; a message cut in the
middle of a part is read as far as it goes (a defect).

`new_text`: the reply without the quoted earlier message and the signature. From the
plain text, it is everything above the first of these lines (`QUOTE_MARKERS`):
- an attribution line, also wrapped over two or three lines, holding a digit:
  `On <date>, <name> wrote:` (Gmail, Apple Mail `On 3 Mar 2025, at 10:00, ...`,
  Thunderbird), `Am <date> schrieb <name>:`, `Le <date>, <name> a écrit :`,
  `El <date>, <name> escribió:`;
- a separator: `-----Original Message-----`, `-----Ursprüngliche Nachricht-----`,
  `-----Message d'origine-----`, `-----Mensaje original-----`, and the forwarded
  message lines (`---------- Forwarded message ---------` and its translations);
- Outlook's `________________________________` line;
- a header block: a `From:` / `Von:` / `De :` / `De:` line followed within five lines
  by `Sent:` / `Date:` / `Gesendet:` / `Datum:` / `Envoyé :` / `Date :` /
  `Enviado:` / `Enviado el:` / `Fecha:` (also `*From:*` as Gmail writes bold);
- the signature separator `-- ` (or `--`), and the mobile signatures
  `Sent from my <device>`, `Get Outlook for <platform>`, `Von meinem <device> gesendet`,
  `Envoyé de mon <device>`, `Enviado desde mi <device>`.
Any other client's attribution counts too when it is the line just above a `>` quote,
ends with `:` and holds a digit or an `@`. Lines that start with `>` are dropped
wherever they are. When the plain text shows no
marker and the HTML has a quote of its own, the HTML gives the cut: the Gmail quote
(`class="gmail_quote"`), the Apple Mail and Thunderbird quote (`<blockquote
type="cite">`), Outlook's reply header (`id="divRplyFwdMsg"`, `id="appendonsend"`,
`id="mail-editor-reference-message-container"`: everything after it is the earlier
message), Yahoo's `yahoo_quoted`, and the signatures `gmail_signature`,
`moz-signature`. A reply written between the quoted lines keeps its own lines; one
written under an attribution line is cut there (best effort).
"""

import codecs
import email
import email.errors
import email.message
import email.parser
import email.policy
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.header import decode_header
from email.utils import getaddresses, parsedate_to_datetime
from html import unescape as html_unescape
from html.parser import HTMLParser

import nh3

MAX_PARTS = 500  # MIME leaves read; the rest of a message with more is a defect
MAX_DEFECTS = 20


@dataclass
class Attachment:
    filename: str
    content_type: str
    size: int


@dataclass
class ParsedMessage:
    from_email: str = ""
    from_name: str = ""
    to: list[str] = field(default_factory=list)
    cc: list[str] = field(default_factory=list)
    subject: str = ""
    message_id: str = ""
    in_reply_to: str = ""
    references: list[str] = field(default_factory=list)
    date: datetime | None = None
    text: str = ""
    new_text: str = ""
    html: str = ""
    attachments: list[Attachment] = field(default_factory=list)
    truncated: bool = False
    auto_submitted: bool = False
    defects: list[str] = field(default_factory=list)


def message_parse(raw: bytes, *, max_chars: int) -> ParsedMessage:
    """The message as a person reads it; never raises (what went wrong is in `defects`)."""
    try:
        return _message_parse(raw, max_chars=max(0, max_chars))
    except Exception as exc:  # a last resort: a poll must go on whatever the bytes
        parsed = ParsedMessage(defects=[f"unreadable: {type(exc).__name__}"])
        try:
            _read_headers(_headers_only(raw), parsed)
        except Exception as header_exc:
            parsed.defects.append(f"unreadable headers: {type(header_exc).__name__}")
        return parsed


def _message_parse(raw: bytes, *, max_chars: int) -> ParsedMessage:
    if not isinstance(raw, bytes | bytearray | memoryview):
        raise TypeError("raw must be bytes")
    raw = bytes(raw)
    parsed = ParsedMessage()
    if not raw.strip():
        parsed.defects.append("empty message")
        return parsed
    msg = email.message_from_bytes(raw, policy=email.policy.compat32)
    _read_headers(msg, parsed)
    defects = parsed.defects

    plain_parts: list[str] = []
    html_parts: list[str] = []
    leaves, visited = _parts(msg, defects)
    for part in leaves:
        ctype = part.get_content_type()
        disposition = (part.get_content_disposition() or "").lower()
        filename = _filename(part)
        is_body = ctype in ("text/plain", "text/html") and disposition != "attachment"
        if is_body and not filename:
            body = _part_text(part, defects)
            if ctype == "text/html":
                html_parts.append(body)
            else:
                plain_parts.append(_unflow_if_flowed(part, body))
        else:
            parsed.attachments.append(
                Attachment(
                    filename=filename or _default_filename(part),
                    content_type=ctype,
                    size=_part_size(part),
                )
            )
    for part in visited:  # after decoding: a bad base64 body is found then
        for defect in part.defects:
            _add_defect(defects, type(defect).__name__.removesuffix("Defect"))

    text = _normalize_newlines("\n\n".join(p.strip("\n") for p in plain_parts))
    html = "\n".join(html_parts).strip()
    if not text.strip() and html:
        text = html_to_text(html)
    if not text.strip() and not html:
        _add_defect(defects, "no text body")

    new_text, found = quote_cut(text)
    if html and not found:
        html_text, html_found = _html_render(html, cut=True)
        if html_found:
            new_text, _ = quote_cut(html_text)

    parsed.text, cut_text = _cut(text, max_chars)
    parsed.new_text, cut_new = _cut(new_text, max_chars)
    parsed.html, cut_html = _sanitize_bounded(html, max_chars) if html else ("", False)
    parsed.truncated = cut_text or cut_new or cut_html
    return parsed


# --- headers -------------------------------------------------------------------------

_FOLD = re.compile(r"\r?\n(?=[ \t])")
_ANGLE_ID = re.compile(r"<([^<>\s]+)>")
_PRECEDENCE_AUTO = {"auto_reply", "bulk", "junk", "list"}


def _headers_only(raw: bytes) -> email.message.Message:
    return email.parser.BytesHeaderParser(policy=email.policy.compat32).parsebytes(
        bytes(raw) if isinstance(raw, bytes | bytearray | memoryview) else b""
    )


def _read_headers(msg: email.message.Message, parsed: ParsedMessage) -> None:
    headers: dict[str, list[str]] = {}
    for name, value in msg.raw_items():
        headers.setdefault(str(name).strip().lower(), []).append(_header_str(value))
    defects = parsed.defects

    def first(name: str) -> str:
        return headers.get(name, [""])[0]

    senders = _addresses(headers.get("from", []), defects)
    if senders:
        parsed.from_name, parsed.from_email = senders[0]
    parsed.to = [address for _, address in _addresses(headers.get("to", []), defects)]
    parsed.cc = [address for _, address in _addresses(headers.get("cc", []), defects)]
    parsed.subject = _unfold(header_decode(first("subject"), defects))
    parsed.message_id = _message_id(first("message-id"))
    in_reply_to = _message_ids(first("in-reply-to"))
    parsed.in_reply_to = in_reply_to[0] if in_reply_to else ""
    parsed.references = _message_ids(" ".join(headers.get("references", [])))
    parsed.date = _date(first("date"), defects)
    parsed.auto_submitted = _is_auto_submitted(headers)


def _header_str(value: object) -> str:
    """A raw header value as text: raw 8-bit bytes (kept by the parser as surrogate
    escapes) read as UTF-8, else Windows-1252; unfolded (RFC 5322 2.2.3)."""
    text = _FOLD.sub("", str(value))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        data = text.encode("utf-8", "surrogateescape")
        text = _decode_bytes(data, None, [])
    return text


def header_decode(value: str, defects: list[str]) -> str:
    """A header value with its RFC 2047 encoded words decoded (any charset)."""
    if "=?" not in value:
        return value
    try:
        chunks = decode_header(value)
    except Exception:
        _add_defect(defects, "bad encoded word")
        return value
    out = []
    for chunk, charset in chunks:
        if isinstance(chunk, str):
            out.append(chunk)
        elif charset is None:
            try:
                out.append(chunk.decode("raw-unicode-escape"))
            except UnicodeDecodeError:
                out.append(chunk.decode("latin-1"))
        else:
            out.append(_decode_bytes(chunk, charset, defects))
    return "".join(out)


def _unfold(value: str) -> str:
    return " ".join(value.split())


def _addresses(values: list[str], defects: list[str]) -> list[tuple[str, str]]:
    """(decoded display name, lower-cased address) pairs of address headers."""
    found: list[tuple[str, str]] = []
    for name, address in getaddresses(values):
        address = address.strip().lower()
        if not address:
            continue
        found.append((_unfold(header_decode(name, defects)).strip('"').strip(), address))
    if values and any(v.strip() for v in values) and not found:
        _add_defect(defects, "unreadable address header")
    return found


def _message_id(value: str) -> str:
    ids = _message_ids(value)
    return ids[0] if ids else ""


def _message_ids(value: str) -> list[str]:
    """The `<id>`s of a header, in order; a bare id (some providers drop the brackets)
    counts as one."""
    found = _ANGLE_ID.findall(value)
    if not found and value.strip() and len(value.split()) == 1:
        found = [value.strip()]
    return found


def _date(value: str, defects: list[str]) -> datetime | None:
    if not value.strip():
        return None
    try:
        when = parsedate_to_datetime(_unfold(value))
    except Exception:
        _add_defect(defects, "unreadable date")
        return None
    if when.tzinfo is None:  # "-0000": UTC, with no statement about the local zone
        when = when.replace(tzinfo=UTC)
    return when


def _is_auto_submitted(headers: dict[str, list[str]]) -> bool:
    """RFC 3834 and the headers auto-responders set in its stead."""

    def values(name: str) -> list[str]:
        return [v.strip().lower() for v in headers.get(name, [])]

    if any(v and v.split(";")[0].strip() != "no" for v in values("auto-submitted")):
        return True
    if any(v != "no" for v in values("x-autoreply")) or "x-autorespond" in headers:
        return True
    if any(v in _PRECEDENCE_AUTO for v in values("precedence")):
        return True
    for v in values("x-auto-response-suppress"):
        tokens = {t.strip() for t in v.split(",")}
        if tokens & {"all", "oof"}:
            return True
    return False


# --- MIME tree -----------------------------------------------------------------------


def _parts(
    msg: email.message.Message, defects: list[str]
) -> tuple[list[email.message.Message], list[email.message.Message]]:
    """The leaves of the MIME tree in order (attached messages as leaves), and every
    part visited; iterative, so a deep nesting cannot exhaust the stack."""
    leaves: list[email.message.Message] = []
    visited: list[email.message.Message] = []
    stack: list[email.message.Message] = [msg]
    while stack:
        part = stack.pop()
        visited.append(part)
        if len(leaves) >= MAX_PARTS:
            _add_defect(defects, "too many parts")
            break
        payload = part.get_payload()
        if part.get_content_maintype() == "multipart" and isinstance(payload, list):
            stack.extend(reversed([p for p in payload if isinstance(p, email.message.Message)]))
        elif part.get_content_maintype() == "multipart":
            # A multipart without a usable boundary: its bytes are read as text.
            leaves.append(part)
        else:
            leaves.append(part)
    return leaves, visited


def _filename(part: email.message.Message) -> str:
    try:
        name = part.get_filename() or ""
    except Exception:
        return ""
    return _unfold(header_decode(_header_str(name), []))


def _default_filename(part: email.message.Message) -> str:
    if part.get_content_type() == "message/rfc822":
        inner = part.get_payload()
        if isinstance(inner, list) and inner and isinstance(inner[0], email.message.Message):
            subject = _unfold(header_decode(_header_str(inner[0].get("subject", "")), []))
            if subject:
                return f"{subject}.eml"
        return "message.eml"
    return ""


def _part_size(part: email.message.Message) -> int:
    try:
        if part.get_content_type() == "message/rfc822" or part.is_multipart():
            inner = part.get_payload()
            if isinstance(inner, list):
                return sum(len(p.as_bytes()) for p in inner if isinstance(p, email.message.Message))
            return len(str(inner))
        data = part.get_payload(decode=True)
        return len(data) if isinstance(data, bytes) else 0
    except Exception:
        return 0


def _part_text(part: email.message.Message, defects: list[str]) -> str:
    data = part.get_payload(decode=True)
    if not isinstance(data, bytes):
        payload = part.get_payload()
        return payload if isinstance(payload, str) else ""
    charset = part.get_param("charset")
    if isinstance(charset, tuple):  # RFC 2231 form: (charset, language, value)
        charset = charset[2]
    return _decode_bytes(data, charset if isinstance(charset, str) else None, defects)


# What mail clients mean by a label, where Python's codec of that name is narrower.
_CHARSET_READ_AS: dict[str, tuple[str, ...]] = {
    "us-ascii": ("utf-8", "cp1252"),
    "ascii": ("utf-8", "cp1252"),
    "iso-8859-1": ("cp1252",),
    "iso8859-1": ("cp1252",),
    "latin1": ("cp1252",),
    "latin-1": ("cp1252",),
    "utf-8": ("utf-8-sig",),
    "utf8": ("utf-8-sig",),
    "iso-2022-jp": ("iso2022_jp", "iso2022_jp_ext", "iso2022_jp_2", "iso2022_jp_2004"),
    "shift_jis": ("cp932",),
    "shift-jis": ("cp932",),
    "gb2312": ("gb18030",),
    "gbk": ("gb18030",),
    "ks_c_5601-1987": ("cp949",),
    "euc-kr": ("cp949",),
    "big5": ("big5hkscs",),
    "tis-620": ("cp874",),
    "iso-8859-8-i": ("iso-8859-8",),
    "iso-8859-6-i": ("iso-8859-6",),
}
_NO_CHARSET = {"", "unknown-8bit", "x-unknown", "unknown", "default", "none", "charset"}


def _decode_bytes(data: bytes, charset: str | None, defects: list[str]) -> str:
    """Bytes as text in the declared charset; when it is missing, unknown or wrong,
    UTF-8, then Windows-1252, then ISO-8859-1 (which decodes any byte)."""
    label = (charset or "").strip().strip("\"'").lower()
    if label not in _NO_CHARSET:
        for codec in _CHARSET_READ_AS.get(label, (label,)):
            try:
                if not getattr(codecs.lookup(codec), "_is_text_encoding", True):
                    raise LookupError(codec)
                return data.decode(codec)
            except LookupError:
                _add_defect(defects, f"unknown charset {label[:40]}")
                break
            except (UnicodeError, ValueError, TypeError):
                continue
        else:
            _add_defect(defects, f"not {label[:40]}")
    for codec in ("utf-8", "cp1252"):
        try:
            return data.decode(codec)
        except UnicodeError:
            continue
    return data.decode("latin-1")


def _normalize_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _unflow_if_flowed(part: email.message.Message, text: str) -> str:
    fmt = part.get_param("format")
    if not isinstance(fmt, str) or fmt.strip().lower() != "flowed":
        return text
    delsp = part.get_param("delsp")
    return unflow(text, delsp=isinstance(delsp, str) and delsp.strip().lower() == "yes")


def unflow(text: str, *, delsp: bool) -> str:
    """format=flowed (RFC 3676) text with its soft line breaks joined: a line ending in a
    space goes on in the next line of the same quote depth."""
    out: list[str] = []
    buf: str | None = None
    buf_depth = 0

    def emit(depth: int, content: str) -> None:
        out.append((">" * depth + " " + content) if depth else content)

    for line in _normalize_newlines(text).split("\n"):
        depth = len(line) - len(line.lstrip(">"))
        content = line[depth:]
        if content.startswith(" "):  # space-stuffing
            content = content[1:]
        flowed = content.endswith(" ") and content != "-- "
        if flowed and delsp:
            content = content[:-1]
        if buf is not None and depth != buf_depth:
            emit(buf_depth, buf)
            buf = None
        buf = content if buf is None else buf + content
        buf_depth = depth
        if not flowed:
            emit(buf_depth, buf)
            buf = None
    if buf is not None:
        emit(buf_depth, buf)
    return "\n".join(out)


def _add_defect(defects: list[str], defect: str) -> None:
    if defect not in defects and len(defects) < MAX_DEFECTS:
        defects.append(defect)


# --- HTML ----------------------------------------------------------------------------

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
    return _SANITIZER.clean(html)


def _sanitize_bounded(html: str, max_chars: int) -> tuple[str, bool]:
    """The sanitized HTML within max_chars: the input is cut and sanitized again until it
    fits, so the result is always well-formed."""
    clean = html_sanitize(html)
    if len(clean) <= max_chars:
        return clean, False
    budget = max_chars
    while budget > 0:
        clean = html_sanitize(html[:budget])
        if len(clean) <= max_chars:
            return clean, True
        budget = min(budget - 1, budget * max_chars // max(len(clean), 1))
    return "", True


def _cut(text: str, max_chars: int) -> tuple[str, bool]:
    if len(text) <= max_chars:
        return text, False
    return text[:max_chars], True


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


class _TextRenderer(HTMLParser):
    """A readable text rendering of HTML; with `cut`, without the quoted earlier message."""

    def __init__(self, *, cut: bool) -> None:
        super().__init__(convert_charrefs=True)
        self.cut = cut
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

    def newline(self, blank: bool = False, *, always: bool = False) -> None:
        """End the current line (an empty one only for `always`: a <br>); with `blank`,
        leave a blank line after it (a paragraph)."""
        line = "".join(self.current)
        if not self.pre:
            line = " ".join(line.split())
        if line.strip() or always:
            self.lines.append((self.depth, line.rstrip()))
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

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in _VOID_TAGS:
            self.handle_endtag(tag)

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


def _html_render(html: str, *, cut: bool) -> tuple[str, bool]:
    renderer = _TextRenderer(cut=cut)
    try:
        renderer.feed(html)
        renderer.close()
    except Exception:
        # The parser gave up on malformed markup: the text nh3 leaves of it instead.
        plain = nh3.clean(html, tags=set(), clean_content_tags=set(_HIDDEN_TAGS))
        return _normalize_newlines(html_unescape(plain)).strip(), False
    return renderer.rendered(), renderer.found_quote


def html_to_text(html: str) -> str:
    """A readable text rendering of an HTML body (see the module docstring)."""
    return _html_render(html, cut=False)[0]


# --- the quoted earlier message ------------------------------------------------------

# Attribution lines, per language: they end with the verb and a colon; with a digit in
# them (a date or time), also when a client wrapped them over two or three lines.
ATTRIBUTION_PATTERNS = {
    "en": r"^on\b.{4,400}\bwrote\s?:$",
    "de": r"^am\b.{4,400}\bschrieb\b.{0,400}:$",
    "fr": r"^le\b.{4,400}\ba\s+écrit\s?:$",
    "es": r"^el\b.{4,400}\bescribió\s?:$",
}
SEPARATOR_PATTERNS = {
    "en": r"^-{2,}\s*(original message|forwarded message)\s*-{2,}$",
    "de": r"^-{2,}\s*(ursprüngliche nachricht|originalnachricht|weitergeleitete nachricht)\s*-{2,}$",
    "fr": r"^-{2,}\s*(message d'origine|message original|message transféré)\s*-{2,}$",
    "es": r"^-{2,}\s*(mensaje original|mensaje reenviado)\s*-{2,}$",
    "outlook": r"^_{20,}$",
}
HEADER_FROM = r"^\*?(from|von|de|da)\s?:\*?\s*\S"
HEADER_SENT = r"^\*?(sent|date|gesendet|datum|envoyé|date|enviado|enviado el|fecha)\s?:\*?\s*\S"
SIGNATURE_PATTERNS = {
    "separator": r"^--\s?$",
    "en": r"^(sent from my \S+( \S+)?|sent from outlook for \S+|get outlook for \S+)\.?$",
    "de": r"^von meinem \S+( \S+)? gesendet\.?$",
    "fr": r"^envoyé de mon \S+( \S+)?\.?$",
    "es": r"^enviado desde mi \S+( \S+)?\.?$",
}
QUOTE_MARKERS = {
    "attribution": ATTRIBUTION_PATTERNS,
    "separator": SEPARATOR_PATTERNS,
    "header block": {"from": HEADER_FROM, "sent": HEADER_SENT},
    "signature": SIGNATURE_PATTERNS,
}

_ATTRIBUTION = [re.compile(p, re.IGNORECASE | re.DOTALL) for p in ATTRIBUTION_PATTERNS.values()]
_SEPARATOR = [re.compile(p, re.IGNORECASE) for p in SEPARATOR_PATTERNS.values()]
_SIGNATURE = [re.compile(p, re.IGNORECASE) for p in SIGNATURE_PATTERNS.values()]
_HEADER_FROM = re.compile(HEADER_FROM, re.IGNORECASE)
_HEADER_SENT = re.compile(HEADER_SENT, re.IGNORECASE)
_HEADER_FIELD = re.compile(r"^\*?[\w-]{2,20}( [\w-]{2,10})?\s?:\*?\s", re.IGNORECASE)


def _is_attribution(lines: list[str], i: int) -> bool:
    joined = lines[i].strip()
    for extra in range(3):
        if extra:
            if i + extra >= len(lines) or not lines[i + extra].strip():
                return False
            joined += " " + lines[i + extra].strip()
        if len(joined) > 500:
            return False
        if any(ch.isdigit() for ch in joined) and any(p.match(joined) for p in _ATTRIBUTION):
            return True
    return False


def _is_header_block(lines: list[str], i: int) -> bool:
    if not _HEADER_FROM.match(lines[i].strip()):
        return False
    return any(_HEADER_SENT.match(line.strip()) for line in lines[i + 1 : i + 6])


def _is_marker(lines: list[str], i: int) -> bool:
    line = lines[i].strip()
    if not line or line.startswith(">"):
        return False
    if any(p.match(line) for p in _SEPARATOR):
        if line.startswith("_"):  # Outlook's line: a header field must follow
            rest = [x.strip() for x in lines[i + 1 : i + 4] if x.strip()]
            return bool(rest) and bool(_HEADER_FIELD.match(rest[0]))
        return True
    if any(p.match(line) for p in _SIGNATURE):
        return True
    return _is_header_block(lines, i) or _is_attribution(lines, i)


def quote_cut(text: str) -> tuple[str, bool]:
    """The new part of a reply's text, and whether a quote marker was found (see the
    module docstring for the markers)."""
    lines = _normalize_newlines(text).split("\n")
    found = False
    for i, line in enumerate(lines):
        if _is_marker(lines, i):
            lines = lines[:i]
            found = True
            break
        if line.lstrip().startswith(">"):
            # Any client's attribution: the line just above the quote, ending in ":"
            # and holding a date or an address ("2025年3月3日(月) 10:00 Anna <a@b>:").
            k = i - 1
            while k >= 0 and not lines[k].strip():
                k -= 1
            above = lines[k].strip() if k >= 0 else ""
            if (
                above.endswith(":")
                and len(above) <= 300
                and ("@" in above or any(ch.isdigit() for ch in above))
            ):
                lines = lines[:k]
                found = True
                break
    kept = [line for line in lines if not line.lstrip().startswith(">")]
    if len(kept) != len(lines):
        found = True
    out: list[str] = []
    for line in kept:
        line = line.rstrip()
        if not line and (not out or not out[-1]):
            continue
        out.append(line)
    return "\n".join(out).strip("\n"), found
