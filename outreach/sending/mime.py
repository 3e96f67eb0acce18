"""The email policies the sending engine builds messages with: the standard library's
SMTP policies, made cheaper without changing a byte of what they produce.

`email.headerregistry.HeaderRegistry` creates a new class for every header it parses,
and every header is parsed when set and refolded when the message is serialised. For
a batch of messages from one mailbox, most headers are the same every time (From, the
MIME headers, List-Unsubscribe-Post, X-Auto-Response-Suppress). Here:

- the header classes are composed once per header name;
- a header whose name is in SHARED_HEADERS is parsed once per distinct value and the
  (immutable) header object is shared by the messages that set it;
- the folded text of such a shared header is computed once per policy;
- the multipart boundary is checked against the text without compiling a regular
  expression per message (BoundaryGenerator).

And for the common shape of a message, `message_bytes_fast` writes the bytes the
`email` package would write without building an EmailMessage at all (below).

tests/outreach/test_mime.py builds messages with these policies and with the plain
standard ones and compares the bytes, and compares `message_bytes_fast` with the
`email` package over many generated messages.
"""

# NLCRE, EmailPolicy._fold, BytesGenerator._compile_re and _encode_text are private parts
# of the email package that typeshed does not describe: their uses carry a type: ignore.
import random
import re
import sys
from email.generator import NLCRE, BytesGenerator  # type: ignore[attr-defined]
from email.headerregistry import HeaderRegistry
from email.policy import EmailPolicy
from io import BytesIO

# Headers whose values repeat across messages; a multipart Content-Type (its boundary
# is unique) is left out.
SHARED_HEADERS = frozenset(
    {
        "from",
        "list-unsubscribe-post",
        "x-auto-response-suppress",
        "mime-version",
        "content-transfer-encoding",
        "content-type",
    }
)
SHARED_MAX = 512  # distinct shared values kept; the cache starts over past it


class SharingHeaderFactory(HeaderRegistry):
    def __init__(self):
        super().__init__()
        self._classes: dict = {}
        self._shared: dict = {}

    def __getitem__(self, name):
        key = name.lower()
        cls = self._classes.get(key)
        if cls is None:
            cls = self._classes[key] = super().__getitem__(name)
        return cls

    def __call__(self, name, value):
        if (
            type(value) is str
            and name.lower() in SHARED_HEADERS
            and "boundary=" not in value.lower()
        ):
            key = (name, value)
            header = self._shared.get(key)
            if header is None:
                if len(self._shared) >= SHARED_MAX:
                    self._shared.clear()
                header = self[name](name, value)
                header._outreach_folds = {}  # policy -> folded text
                self._shared[key] = header
            return header
        return self[name](name, value)


class SharingPolicy(EmailPolicy):
    def _fold(self, name, value, refold_binary=False):
        folds = getattr(value, "_outreach_folds", None)
        if folds is None:
            return super()._fold(name, value, refold_binary=refold_binary)  # type: ignore[misc]
        key = (self, refold_binary)
        folded = folds.get(key)
        if folded is None:
            folded = folds[key] = super()._fold(  # type: ignore[misc]
                name, value, refold_binary=refold_binary
            )
        return folded


class BoundaryGenerator(BytesGenerator):
    """email.generator.BytesGenerator, whose multipart boundary check skips compiling a
    regular expression (a new one per message: the boundary is random) when the boundary
    cannot occur in the text at all, which is every time in practice. Same random draw,
    same boundary format; when the text does contain it, the standard check decides."""

    @classmethod
    def _make_boundary(cls, text=None):
        token = random.randrange(sys.maxsize)
        boundary = ("=" * 15) + (_BOUNDARY_FORMAT % token) + "=="
        if text is None or b"--" + boundary.encode("ascii") not in text:
            return boundary
        b = boundary
        counter = 0
        while True:
            cre = cls._compile_re(  # type: ignore[attr-defined]
                "^--" + re.escape(b) + "(--)?$", re.MULTILINE
            )
            if not cre.search(text):
                break
            b = boundary + "." + str(counter)
            counter += 1
        return b


_BOUNDARY_FORMAT = f"%0{len(repr(sys.maxsize - 1))}d"  # as email.generator's


def message_bytes(msg, *, policy) -> bytes:
    """`msg.as_bytes(policy=policy)`, through BoundaryGenerator."""
    fp = BytesIO()
    BoundaryGenerator(fp, mangle_from_=False, policy=policy).flatten(msg, unixfrom=False)
    return fp.getvalue()


# --- the common case without the email package -----------------------------------------------
#
# What EmailMessage + set_content + add_alternative + BytesGenerator write for the messages
# of outreach.sending.message.message_build, written directly. Per header, the value is written as
# given when the standard path writes it unchanged (its parsing and folding code, read for
# Python 3.11, keeps such a value as it is; the tests check it): printable ASCII words
# separated by single spaces, no RFC 2047 encoded-word opener ("=?", which the parser
# would decode), and the whole line within the policy's max_line_length (998) with a
# wide margin, so the folding code never breaks or encodes it. Address and Message-ID
# values must also have the plain shapes below. Any other value (a non-ASCII display
# name or subject, a long References) is folded by the standard header classes, one
# header at a time. Bodies are encoded by the standard function (7bit / 8bit / quoted-
# printable / base64, its heuristics), the MIME headers are the constant text the
# standard path writes, and the multipart boundary is drawn and checked by
# BoundaryGenerator._make_boundary as in message_bytes.
#
# Anything unexpected (an exception, a policy other than the CRLF, 8bit, non-utf8 one)
# returns None and the caller builds the message through the email package, which then
# also raises what it would have raised.

try:  # the standard body encoder set_content uses (private: guarded, tested)
    from email.contentmanager import _encode_text  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - another Python: the email package does it all
    _encode_text = None

_LINE_MARGIN = 100  # characters kept clear of max_line_length
_PLAIN = re.compile(r"[!-~]+(?: [!-~]+)*")
# A dot-atom address as formataddr writes it; the display name either atoms (no quoting
# needed) or a quoted string without backslash or double quote (nothing escaped).
_ATEXT = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]"
_ADDR_SPEC = rf"{_ATEXT}+(?:\.{_ATEXT}+)*@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*"
_ADDRESS = re.compile(
    rf"(?:(?:{_ATEXT}+(?: {_ATEXT}+)*|\"[!#-\[\]-~]+(?: [!#-\[\]-~]+)*\") <{_ADDR_SPEC}>"
    rf"|{_ADDR_SPEC})"
)
_MESSAGE_ID = re.compile(r"<[A-Za-z0-9._-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*>")
_DATE = re.compile(
    r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug"
    r"|Sep|Oct|Nov|Dec) \d{4} \d\d:\d\d:\d\d [+-]\d{4}"
)
# Header name (lower case) -> the shape a value must have to be written as given.
_PLAIN_SHAPES = {
    "to": _ADDRESS,
    "from": _ADDRESS,
    "message-id": _MESSAGE_ID,
    "in-reply-to": _PLAIN,
    "references": _PLAIN,
    "subject": _PLAIN,
    "date": _DATE,
    "list-unsubscribe": _PLAIN,
    "list-unsubscribe-post": _PLAIN,
    "x-auto-response-suppress": _PLAIN,
}
_CRLF = b"\r\n"
_TEXT_HEADERS = b'Content-Type: text/plain; charset="utf-8"\r\nContent-Transfer-Encoding: '
_HTML_HEADERS = b'Content-Type: text/html; charset="utf-8"\r\nContent-Transfer-Encoding: '
_MIME_VERSION = b"MIME-Version: 1.0\r\n"


def _header_bytes(name: str, value: object, policy) -> bytes:
    shape = _PLAIN_SHAPES.get(name.lower())
    if (
        shape is not None
        and isinstance(value, str)  # else an Address (a non-ASCII display name)
        and len(name) + len(value) + 2 <= policy.max_line_length - _LINE_MARGIN
        and shape.fullmatch(value)
        and "=?" not in value
    ):
        return f"{name}: {value}\r\n".encode("ascii")
    # As EmailMessage.__setitem__ stores it and the generator writes it.
    return policy.fold_binary(*policy.header_store_parse(name, value))


def _body_bytes(text: str, policy) -> tuple[bytes, bytes]:
    """(Content-Transfer-Encoding, body as the generator writes it) of a text part."""
    cte, payload = _encode_text(text, "utf-8", None, policy)
    if cte == "7bit" or cte == "8bit":
        # Lines joined by LF, ending with one; no CR left (splitlines took them).
        body = payload.replace("\n", "\r\n")
    else:
        body = NLCRE.sub("\r\n", payload)
    return cte.encode("ascii"), body.encode("ascii", "surrogateescape")


def message_bytes_fast(
    headers: list[tuple[str, object]], text: str, html: str | None, *, policy
) -> bytes | None:
    """What `message_bytes` writes for an EmailMessage(policy=policy) with `headers` set
    in order, `set_content(text)` and, when `html` is given, `add_alternative(html,
    subtype="html")`, serialised with the same policy; None when this function does not
    handle it (see above): build it through the email package."""
    if _encode_text is None or policy.linesep != "\r\n" or policy.utf8 or policy.cte_type != "8bit":
        return None
    try:
        out = [_header_bytes(name, value, policy) for name, value in headers]
        cte, body = _body_bytes(text, policy)
        if html is None:
            out += (_TEXT_HEADERS, cte, _CRLF, _MIME_VERSION, _CRLF, body)
            return b"".join(out)
        html_cte, html_body = _body_bytes(html, policy)
        text_part = b"".join((_TEXT_HEADERS, cte, _CRLF, _CRLF, body))
        html_part = b"".join((_HTML_HEADERS, html_cte, _CRLF, _MIME_VERSION, _CRLF, html_body))
        boundary = BoundaryGenerator._make_boundary(text_part + _CRLF + html_part).encode("ascii")
        out += (
            _MIME_VERSION,
            b'Content-Type: multipart/alternative; boundary="',
            boundary,
            b'"\r\n\r\n--',
            boundary,
            _CRLF,
            text_part,
            b"\r\n--",
            boundary,
            _CRLF,
            html_part,
            b"\r\n--",
            boundary,
            b"--\r\n",
        )
        return b"".join(out)
    except Exception:  # noqa: BLE001 - the email package decides (and raises) instead
        return None
