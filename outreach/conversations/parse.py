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
  list items, `text (url)` links, blockquotes as `> ` lines), in time linear in the
  HTML whatever its markup (outreach.conversations.html, "Bounds").

Sanitizing and the text rendering of HTML: outreach.conversations.html. The cut of the
quoted earlier message (`new_text`): outreach.conversations.quotes.

Bounds: `text`, `new_text` and `html` are each at most `max_chars` characters;
`truncated` says one was cut. The HTML is cut before it is sanitized, so what is
stored is well-formed. The caller bounds the bytes it hands over; a message cut in the
middle of a part is read as far as it goes (a defect).
"""

# Long: one walk of a message, from its headers to its MIME leaves; the helpers share
# the defect list and the charset rules, and read best together.
import email
import email.errors
import email.message
import email.parser
import email.policy
import encodings
import encodings.aliases
import pkgutil
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.header import decode_header
from email.utils import getaddresses, parsedate_to_datetime, unquote

from outreach.conversations.html import (
    html_render,
    html_sanitize_bounded,
    html_to_text,
    newlines_normalize,
)
from outreach.conversations.quotes import quote_cut, words_of_their_own

MAX_PARTS = 500  # MIME leaves read; the rest of a message with more is a defect
MAX_DEFECTS = 20
# Multipart and message/* parts read: the email package parses (and walks) them
# recursively, so 3,000 nested ones exhaust the stack; the message is cut before the
# first one past this many (a defect), which bounds the depth of every walk of it.
MAX_CONTAINERS = 100
_CONTAINER = re.compile(rb"^content-type:[ \t\r\n]*(?:multipart|message)/", re.I | re.M)


def message_from_bytes_bounded(raw: bytes) -> tuple[email.message.Message, bool]:
    """The parsed message (compat32), cut before its (MAX_CONTAINERS + 1)th multipart or
    message/* part if it has more; and whether it was cut."""
    cut = False
    for count, container in enumerate(_CONTAINER.finditer(raw), start=1):
        if count > MAX_CONTAINERS:
            raw, cut = raw[: container.start()], True
            break
    return email.message_from_bytes(raw, policy=email.policy.compat32), cut


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
        return message_unparsed(raw, reason=type(exc).__name__)


def message_unparsed(raw: bytes, *, reason: str) -> ParsedMessage:
    """What is kept of a message that could not be read: its headers when they can be
    read, no body, and `unreadable: <reason>` as its defect."""
    parsed = ParsedMessage(defects=[f"unreadable: {reason}"[:300]])
    try:
        _read_headers(_headers_only(raw), parsed)
    except Exception as header_exc:
        parsed.defects.append(f"unreadable headers: {type(header_exc).__name__}")
    return parsed


_SURROGATE = re.compile("[\ud800-\udfff]")


def text_storable(value: str) -> str:
    """`value` as PostgreSQL stores it: no NUL (text and jsonb refuse it; an encoded word
    or a `%00` in a file name decodes to one), no lone surrogate (not UTF-8) but U+FFFD."""
    if "\x00" in value:
        value = value.replace("\x00", "")
    return _SURROGATE.sub("\ufffd", value)


def _message_parse(raw: bytes, *, max_chars: int) -> ParsedMessage:
    if not isinstance(raw, bytes | bytearray | memoryview):
        raise TypeError("raw must be bytes")
    raw = bytes(raw)
    parsed = ParsedMessage()
    if not raw.strip():
        parsed.defects.append("empty message")
        return parsed
    msg, nested_cut = message_from_bytes_bounded(raw)
    _read_headers(msg, parsed)
    defects = parsed.defects
    if nested_cut:
        _add_defect(defects, f"more than {MAX_CONTAINERS} nested parts: cut")

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

    text = newlines_normalize("\n\n".join(p.strip("\n") for p in plain_parts))
    html = "\n".join(html_parts).strip()
    if not text.strip() and html:
        text = html_to_text(html, max_chars)
    if not text.strip() and not html:
        _add_defect(defects, "no text body")

    parsed.text, cut_text = _cut(text, max_chars)
    parsed.new_text, cut_new = _cut(_new_text(text, html, max_chars), max_chars)
    parsed.html, cut_html = html_sanitize_bounded(html, max_chars) if html else ("", False)
    parsed.truncated = cut_text or cut_new or cut_html
    return parsed


def _new_text(text: str, html: str, max_chars: int) -> str:
    """The text without the quoted earlier message (outreach.conversations.quotes); when
    the text shows no marker, the HTML's quote (a client's class or id) gives the cut."""
    new_text, found = quote_cut(text)
    if html and not found:
        html_text, html_found = html_render(html, cut=True, max_chars=max_chars)
        if html_found:
            html_new, _ = quote_cut(html_text)
            # The HTML's cut stops at the client's first quote mark: a reply written
            # below it would be lost, so the cut counts only when it keeps their words.
            if words_of_their_own(html_new):
                new_text = html_new
    return new_text


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
    """The part's file name (Content-Disposition `filename`, else Content-Type `name`),
    RFC 2231 values decoded with the charset rules below (as Message.get_filename
    would, but with any codec Python has)."""
    try:
        value = part.get_param("filename", header="content-disposition")
        if value is None:
            value = part.get_param("name", header="content-type")
    except Exception:
        return ""
    if isinstance(value, tuple):  # RFC 2231: (charset, language, %-decoded value)
        charset, _, text = value
        name = _decode_bytes(text.encode("raw-unicode-escape"), charset or "us-ascii", [])
    else:
        name = unquote(value or "")
    return _unfold(header_decode(_header_str(name.strip()), []))


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
# Python's codecs that are not character sets: transforms (base64, zlib, rot13, ...),
# IDNA and punycode (whose decoder is quadratic: 8 s for 950 KB), escape codecs,
# platform-only ones. A label naming one is an unknown charset.
_NOT_CHARSETS = {
    "aliases", "base64_codec", "bz2_codec", "charmap", "hex_codec", "idna", "mbcs", "oem",
    "punycode", "quopri_codec", "raw_unicode_escape", "rot_13", "undefined",
    "unicode_escape", "uu_codec", "zlib_codec",
}  # fmt: skip
_CHARSET_CODECS = frozenset(m.name for m in pkgutil.iter_modules(encodings.__path__)) - (
    _NOT_CHARSETS
)


def _charset_codec(name: str) -> str | None:
    """The standard library codec module a charset label names (as codecs.lookup finds
    it), when that codec is a character set; else None."""
    normalized = encodings.normalize_encoding(name.lower())
    aliases = encodings.aliases.aliases
    module = aliases.get(normalized) or aliases.get(normalized.replace(".", "_")) or normalized
    return module if module in _CHARSET_CODECS else None


def _decode_bytes(data: bytes, charset: str | None, defects: list[str]) -> str:
    """Bytes as text in the declared charset; when it is missing, unknown or wrong,
    UTF-8, then Windows-1252, then ISO-8859-1 (which decodes any byte)."""
    label = (charset or "").strip().strip("\"'").lower()
    if label not in _NO_CHARSET:
        for name in _CHARSET_READ_AS.get(label, (label,)):
            try:
                codec = _charset_codec(name)
                if codec is None:
                    raise LookupError(name)
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

    for line in newlines_normalize(text).split("\n"):
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


def _cut(text: str, max_chars: int) -> tuple[str, bool]:
    if len(text) <= max_chars:
        return text, False
    return text[:max_chars], True
