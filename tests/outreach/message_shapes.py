"""Generated messages for the message writer's tests (tests/outreach/test_mime.py: the
writer's bytes are the email package's; tests/outreach/test_message_bytes.py: what a mail
client reads in them): `generated_message(rng)` is one step's message, with unicode and
quoted names, IDN and non-ASCII addresses, long subjects, encoded-word look-alikes, long
lines, CR / CRLF / LF bodies and follow-ups drawn from `rng`; and the named shapes both
test: CONTACTS, STEPS, SENDERS."""

import uuid
from datetime import UTC, datetime, timedelta, timezone
from types import SimpleNamespace
from zoneinfo import ZoneInfo

CONTACTS = [
    {"email": "ada@example.org", "first_name": "Ada", "last_name": "Lovelace", "company": "Acme"},
    {"email": "jo@example.org", "first_name": "Doe, Jane", "last_name": '"Q"', "company": "A&B"},
    {"email": "zoe@bücher.example", "first_name": "Zoë", "last_name": "Müller", "company": "Ünï"},
    {"email": "josé@example.org", "first_name": "José", "last_name": "", "company": "Café"},
    {"email": "long@example.org", "first_name": "L" * 300, "last_name": "x", "company": "C" * 900},
    {"email": "cr@example.org", "first_name": "Evil\r\nBcc: x@y.z", "last_name": "", "company": ""},
]
STEPS = [
    {"subject": "Hello {{first_name|there}}", "body_text": "Hi {{first_name}}", "body_html": ""},
    {
        "subject": "Quick question for {{company}}, {{first_name}} – ça va?",
        "body_text": "Hi {{first_name}},\n\nWould {{company}} like to talk?\n" + "x" * 1200,
        "body_html": "<html><body><p>Hi {{first_name}} — {{company}}</p></body></html>",
    },
    {"subject": "", "body_text": "Following up, {{first_name}}.", "body_html": "<p>Up</p>"},
    # A body holding the boundary the draw gives: the standard check decides (it looks
    # for the line ending in LF, so with CRLF it keeps the boundary; so do we).
    {
        "subject": "Boundary",
        "body_text": "a\n--===============0000000000000012345==\nb",
        "body_html": "<p>x</p>\n--===============0000000000000012345==--\n",
    },
]
SENDERS = [("Bench", "bench@sender.example"), ("Sam Sénder, Inc.", "sam@sender.example")]

# Characters names, subjects and bodies are drawn from: plain ASCII, every ASCII special
# of RFC 5322, the encoded-word opener, whitespace, accented and non-Latin letters, emoji.
_ASCII = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_SPECIALS = "!#$%&'*+-/=?^_`{|}~.,;:@<>()[]\\\""
_UNICODE = "éüßçñøÅŁžæ中文日本語한국어Ωπ—–…€“”😀"
_WORDS = ["=?utf-8?q?x?=", "=?", "?=", "Re:", "RE: ", "re: ", "From ", "--", "boundary="]


def _text(rng, *, length, alphabet, words=True):
    parts, size = [], 0
    while size < length:
        roll = rng.random()
        if words and roll < 0.05:
            part = rng.choice(_WORDS)
        elif roll < 0.25:
            part = rng.choice([" ", " ", " ", "  ", "\t"])
        else:
            part = "".join(rng.choices(alphabet, k=rng.randint(1, 12)))
        parts.append(part)
        size += len(part)
    return "".join(parts)


def _alphabet(rng):
    return rng.choice(
        [_ASCII, _ASCII, _ASCII + " .,-'", _ASCII + _SPECIALS, _ASCII + _UNICODE, _UNICODE]
    )


def _name(rng):
    kind = rng.random()
    if kind < 0.15:
        return ""
    if kind < 0.2:
        return _text(rng, length=rng.choice([80, 300, 1200]), alphabet=_alphabet(rng))
    return _text(rng, length=rng.randint(1, 14), alphabet=_alphabet(rng))


def _email(rng):
    local = rng.choice(["r1", "first.last", "a+tag", "o'brien", "x_y-z", "UPPER", "josé"])
    domain = rng.choice(["example.org", "mail.example.co.uk", "bücher.example", "EXAMPLE.COM"])
    return f"{local}@{domain}"


def _body(rng):
    kind = rng.random()
    if kind < 0.05:
        return ""
    lines = []
    for _ in range(rng.choice([1, 3, 12, 40])):
        length = rng.choice([0, 10, 70, 200, 1100]) if rng.random() < 0.9 else 3000
        lines.append(_text(rng, length=length, alphabet=_alphabet(rng)))
    return rng.choice(["\n", "\r\n", "\r"]).join(lines) + rng.choice(["", "\n", "\r\n"])


def generated_message(rng):
    """One generated message: credential, campaign, step, enrollment, thread, now."""
    from_name = rng.choice(["Bench", "Sam Sénder, Inc.", "Dr. Who", "", _name(rng)])
    # (A non-ASCII sender domain cannot be sent from: both ways raise the same error.)
    from_email = rng.choice(["bench@sender.example", "a.b@sender.example"] * 10 + ["s@bü.example"])
    contact = SimpleNamespace(
        email=_email(rng),
        first_name=_name(rng),
        last_name=_name(rng),
        company=_name(rng),
        fields={"city": _name(rng)},
    )
    reply = rng.random() < 0.3
    subject = (
        ""
        if reply
        else rng.choice(
            [
                "Quick question, {{first_name|there}}",
                "{{company}} and {{fields.city}}",
                _text(rng, length=rng.choice([5, 60, 120, 990, 1200]), alphabet=_alphabet(rng)),
            ]
        )
    )
    body_text = rng.choice(["Hi {{first_name}},\n\nWould {{company}} like to talk?", _body(rng)])
    body_html = rng.choice(
        [
            "",
            "<html><body><p>Hi {{first_name}},</p><p>{{company}}?</p></body></html>",
            "<p>{{company}}</p>",
            _body(rng),
        ]
    )
    thread = [
        SimpleNamespace(
            subject=rng.choice(["Re: Earlier", "Hello " + _name(rng), "re: RE: " + _name(rng)]),
            message_id=f"{uuid.UUID(int=rng.getrandbits(128)).hex}@sender.example",
        )
        for _ in range(rng.choice([0, 0, 1, 2, 25]) if reply else 0)
    ]
    now = rng.choice(
        [
            datetime(2026, 3, 2, 10, 0, tzinfo=UTC),
            datetime(2026, 7, 9, 23, 59, 59, 999999, tzinfo=UTC),
            datetime(2026, 3, 29, 1, 30, tzinfo=ZoneInfo("Europe/Paris")),
            datetime(2026, 1, 5, 8, 0, tzinfo=timezone(timedelta(hours=-5, minutes=-30))),
        ]
    )
    return dict(
        credential=SimpleNamespace(from_name=from_name, from_email=from_email),
        campaign=SimpleNamespace(
            track_opens=rng.random() < 0.7,
            track_clicks=False,
            unsubscribe_footer=False,
            account=SimpleNamespace(tracking_domain=""),
        ),
        step=SimpleNamespace(subject=subject, body_text=body_text, body_html=body_html),
        enrollment=SimpleNamespace(
            pk=uuid.UUID(int=rng.getrandbits(128)),
            contact_id=uuid.UUID(int=rng.getrandbits(128)),
            contact=contact,
        ),
        thread=thread,
        first_subject=rng.choice(["", "First {{first_name}}", _name(rng)]),
        now=now,
    )
