"""The email policies the sending engine builds messages with: the standard library's
SMTP policies, made cheaper without changing a byte of what they produce.

`email.headerregistry.HeaderRegistry` creates a new class for every header it parses,
and every header is parsed when set and refolded when the message is serialised. For
a batch of messages from one mailbox, most headers are the same every time (From, the
MIME headers, List-Unsubscribe-Post, X-Auto-Response-Suppress). Here:

- the header classes are composed once per header name;
- a header whose name is in SHARED_HEADERS is parsed once per distinct value and the
  (immutable) header object is shared by the messages that set it;
- the folded text of such a shared header is computed once per policy.

tests/outreach/test_mime.py builds messages with these policies and with the plain
standard ones and compares the bytes.
"""

from email.headerregistry import HeaderRegistry
from email.policy import EmailPolicy

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
