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

tests/outreach/test_mime.py builds messages with these policies and with the plain
standard ones and compares the bytes.
"""

import random
import re
import sys
from email.generator import BytesGenerator
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
            return super()._fold(name, value, refold_binary=refold_binary)
        key = (self, refold_binary)
        folded = folds.get(key)
        if folded is None:
            folded = folds[key] = super()._fold(name, value, refold_binary=refold_binary)
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
            cre = cls._compile_re("^--" + re.escape(b) + "(--)?$", re.MULTILINE)
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
