"""outreach.mime's policies produce exactly the bytes of the standard library's: the
same messages built both ways, the random parts (Message-ID, MIME boundary) pinned."""

import random
import uuid
from datetime import UTC, datetime
from email.policy import SMTP, SMTPUTF8
from types import SimpleNamespace

import pytest

from outreach import sending

NOW = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)

pytestmark = pytest.mark.django_db  # the suite's session fixtures need the database

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


def _build(contact, step, sender, *, thread):
    credential = SimpleNamespace(from_name=sender[0], from_email=sender[1])
    enrollment = SimpleNamespace(pk=uuid.UUID(int=7), contact=SimpleNamespace(fields={}, **contact))
    return sending.message_build(
        credential=credential,
        campaign=SimpleNamespace(track_opens=True),
        step=SimpleNamespace(**step),
        enrollment=enrollment,
        thread=thread,
        first_subject="Earlier subject",
        now=NOW,
    ).data


@pytest.fixture
def pinned(monkeypatch):
    monkeypatch.setattr(sending.uuid, "uuid4", lambda: uuid.UUID(int=42))
    # The boundary's random draw, which the standard generator and ours both make.
    monkeypatch.setattr(random, "randrange", lambda n: 12345)


@pytest.mark.parametrize("sender", SENDERS)
@pytest.mark.parametrize("step", STEPS)
def test_the_sharing_policies_write_the_standard_bytes(pinned, monkeypatch, step, sender):
    thread = [SimpleNamespace(subject="Re: Earlier subject", message_id="a@b.example")]
    fast = [_build(c, step, sender, thread=thread) for c in CONTACTS * 2]  # twice: shared
    monkeypatch.setattr(sending, "SMTP_POLICY", SMTP.clone(max_line_length=998))
    monkeypatch.setattr(sending, "SMTPUTF8_POLICY", SMTPUTF8.clone(max_line_length=998))
    monkeypatch.setattr(sending, "message_bytes", lambda msg, policy: msg.as_bytes(policy=policy))
    standard = [_build(c, step, sender, thread=thread) for c in CONTACTS * 2]
    assert fast == standard
    assert all(data.startswith(b"From: ") for data in fast)
