"""outreach.sending.mime writes exactly the bytes of the standard library's email package: the
same messages built both ways, the random parts (Message-ID, MIME boundary) pinned or
drawn the same. The reference is always EmailMessage with the plain standard policies
and `as_bytes` (no sharing, no fast serializer)."""

import random
import sys
import uuid
from datetime import UTC, datetime
from email.policy import SMTP, SMTPUTF8
from types import SimpleNamespace

import pytest

from outreach.sending import message as sending_message
from outreach.sending import mime
from tests.outreach.message_shapes import CONTACTS, SENDERS, STEPS, generated_message

NOW = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)

pytestmark = pytest.mark.django_db  # the suite's session fixtures need the database


def _build(contact, step, sender, *, thread):
    credential = SimpleNamespace(from_name=sender[0], from_email=sender[1])
    enrollment = SimpleNamespace(
        pk=uuid.UUID(int=7),
        contact_id=uuid.UUID(int=8),
        contact=SimpleNamespace(fields={}, **contact),
    )
    return sending_message.message_build(
        credential=credential,
        campaign=SimpleNamespace(
            track_opens=True,
            track_clicks=False,
            unsubscribe_footer=False,
            account=SimpleNamespace(tracking_domain=""),
        ),
        step=SimpleNamespace(**step),
        enrollment=enrollment,
        thread=thread,
        first_subject="Earlier subject",
        now=NOW,
    ).data


@pytest.fixture
def pinned(monkeypatch):
    monkeypatch.setattr(sending_message.uuid, "uuid4", lambda: uuid.UUID(int=42))
    # The boundary's random draw, which the standard generator and ours both make.
    monkeypatch.setattr(random, "randrange", lambda n: 12345)


@pytest.mark.parametrize("sender", SENDERS)
@pytest.mark.parametrize("step", STEPS)
def test_the_sharing_policies_write_the_standard_bytes(pinned, monkeypatch, step, sender):
    thread = [SimpleNamespace(subject="Re: Earlier subject", message_id="a@b.example")]
    fast = [_build(c, step, sender, thread=thread) for c in CONTACTS * 2]  # twice: shared
    monkeypatch.setattr(sending_message, "SMTP_POLICY", SMTP.clone(max_line_length=998))
    monkeypatch.setattr(sending_message, "SMTPUTF8_POLICY", SMTPUTF8.clone(max_line_length=998))
    monkeypatch.setattr(
        sending_message, "message_bytes", lambda msg, policy: msg.as_bytes(policy=policy)
    )
    monkeypatch.setattr(sending_message, "message_bytes_fast", lambda *args, **kwargs: None)
    standard = [_build(c, step, sender, thread=thread) for c in CONTACTS * 2]
    assert fast == standard
    assert all(data.startswith(b"From: ") for data in fast)


# --- the fast serializer (outreach.sending.mime.message_bytes_fast) against the email package --------


def _both_ways(monkeypatch, message, draw_seed):
    """(fast, standard, whether the fast serializer wrote it): the message built through
    outreach.sending as it runs and through the plain email package, the same
    Message-ID and the same boundary draw for both."""
    message_id = uuid.UUID(int=draw_seed)
    monkeypatch.setattr(sending_message.uuid, "uuid4", lambda: message_id)
    wrote = []
    real_fast = mime.message_bytes_fast

    def fast_spy(*args, **kwargs):
        data = real_fast(*args, **kwargs)
        wrote.append(data is not None)
        return data

    random.seed(draw_seed)
    monkeypatch.setattr(sending_message, "message_bytes_fast", fast_spy)
    fast = _build_or_error(message)
    random.seed(draw_seed)
    with monkeypatch.context() as standard_only:
        standard_only.setattr(sending_message, "SMTP_POLICY", SMTP.clone(max_line_length=998))
        standard_only.setattr(
            sending_message, "SMTPUTF8_POLICY", SMTPUTF8.clone(max_line_length=998)
        )
        standard_only.setattr(
            sending_message, "message_bytes", lambda msg, policy: msg.as_bytes(policy=policy)
        )
        standard_only.setattr(sending_message, "message_bytes_fast", lambda *args, **kwargs: None)
        standard = _build_or_error(message)
    return fast, standard, bool(wrote and wrote[0])


def _build_or_error(message):
    try:
        return sending_message.message_build(**message).data
    except Exception as exc:  # noqa: BLE001 - the same failure both ways is fine too
        return (type(exc), str(exc))


def test_the_fast_serializer_writes_the_email_package_bytes(monkeypatch):
    """500 generated messages: unicode and quoted names, IDN and non-ASCII addresses,
    long subjects needing RFC 2047 words, encoded-word look-alikes, long lines (quoted-
    printable, base64), CR / CRLF / LF bodies, follow-ups with In-Reply-To and References
    (up to 25), with and without HTML and the pixel, several time zones."""
    rng = random.Random(20261121)
    fast_count = 0
    for index in range(500):
        message = generated_message(rng)
        fast, standard, wrote = _both_ways(monkeypatch, message, draw_seed=index)
        assert fast == standard, (index, message)
        # It writes every message but SMTPUTF8 ones, and those the email package
        # refuses too (the same exception, raised by the email package).
        smtputf8 = sending_message.ascii_address(message["enrollment"].contact.email) is None
        assert wrote == (not smtputf8 and isinstance(standard, bytes)), (index, message)
        fast_count += wrote
    assert fast_count > 350


COMMON = dict(
    credential=SimpleNamespace(from_name="Bench", from_email="bench@sender.example"),
    campaign=SimpleNamespace(
        track_opens=True,
        track_clicks=False,
        unsubscribe_footer=False,
        account=SimpleNamespace(tracking_domain=""),
    ),
    step=SimpleNamespace(
        subject="Quick question, {{first_name|there}}",
        body_text="Hi {{first_name}},\n\nWould {{company}} like to talk?\n\nBench",
        body_html="<html><body><p>Hi {{first_name}},</p><p>{{company}}?</p></body></html>",
    ),
    thread=[],
    first_subject="",
    now=NOW,
)


def _enrollment(first_name, last_name="", company="Acme", email="r1@bench.example"):
    contact = SimpleNamespace(
        email=email, first_name=first_name, last_name=last_name, company=company, fields={}
    )
    return SimpleNamespace(pk=uuid.UUID(int=7), contact_id=uuid.UUID(int=8), contact=contact)


@pytest.mark.parametrize(
    ("enrollment", "step", "thread", "all_plain"),
    [
        (_enrollment("Ada", "Lovelace"), COMMON["step"], [], True),
        (_enrollment("Jean-Luc", "O'Brien", company="A&B"), COMMON["step"], [], True),
        (_enrollment("Dr. Ada", "Smith, Jr."), COMMON["step"], [], True),  # quoted name
        (_enrollment("Zoë", "Müller", company="Ünï"), COMMON["step"], [], False),  # RFC 2047
        (_enrollment("Ada", email="ada@bücher.example"), COMMON["step"], [], True),  # IDNA
        (_enrollment("=?utf-8?q?Ada?="), COMMON["step"], [], False),  # decoded by the parser
        (
            _enrollment("Ada"),
            SimpleNamespace(subject="", body_text="Up, {{first_name}}.", body_html=""),
            [SimpleNamespace(subject="Hello", message_id=f"{i}@sender.example") for i in range(3)],
            True,
        ),
        (
            _enrollment("Ada"),
            SimpleNamespace(subject="", body_text="Up", body_html="<p>Up</p>"),
            [
                SimpleNamespace(subject="Hello", message_id=f"{'x' * 40}{i}@sender.example")
                for i in range(30)  # a References line past 998 characters: folded
            ],
            False,
        ),
        (
            _enrollment("Ada", company="Ünïcode " * 200),  # long UTF-8 lines: base64
            COMMON["step"],
            [],
            True,
        ),
        (
            _enrollment("Ada", company="x" * 1200 + "é"),  # long, mostly ASCII: quoted-printable
            COMMON["step"],
            [],
            True,
        ),
    ],
)
def test_the_fast_serializer_common_shapes(monkeypatch, enrollment, step, thread, all_plain):
    """Shapes worth naming: the fast serializer writes them (their headers as given when
    `all_plain`, else some folded by the standard header classes), byte for byte."""
    message = {**COMMON, "enrollment": enrollment, "step": step, "thread": thread}
    plain = []
    real_header_bytes = mime._header_bytes

    def header_spy(name, value, policy):
        data = real_header_bytes(name, value, policy)
        plain.append(data == f"{name}: {value}\r\n".encode())
        return data

    monkeypatch.setattr(mime, "_header_bytes", header_spy)
    for seed in range(3):
        fast, standard, wrote = _both_ways(monkeypatch, message, draw_seed=seed)
        assert wrote
        assert fast == standard
    assert all(plain) == all_plain


def test_the_fast_serializer_leaves_other_policies_to_the_email_package():
    headers = [("From", "a@b.example"), ("To", "c@d.example"), ("Subject", "x")]
    assert mime.message_bytes_fast(headers, "x", None, policy=SMTP) is not None
    for policy in (SMTPUTF8, SMTP.clone(linesep="\n"), SMTP.clone(cte_type="7bit")):
        assert mime.message_bytes_fast(headers, "x", None, policy=policy) is None


def test_the_fast_serializer_draws_one_boundary_per_multipart_message(monkeypatch):
    draws = []
    monkeypatch.setattr(random, "randrange", lambda n: draws.append(n) or 12345)
    headers = [("From", "a@b.example")]
    mime.message_bytes_fast(headers, "x", None, policy=sending_message.SMTP_POLICY)
    assert draws == []
    data = mime.message_bytes_fast(headers, "x", "<p>x</p>", policy=sending_message.SMTP_POLICY)
    assert draws == [sys.maxsize]
    assert b'boundary="===============0000000000000012345=="' in data
