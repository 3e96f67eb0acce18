"""What a recipient's mail client reads in the bytes of a step's message
(outreach.sending.message.message_data; tests/outreach/test_mime.py checks they are the
email package's bytes): the exact bytes of the common shape, and for many generated messages (unicode and quoted names,
IDN and non-ASCII addresses, long subjects, encoded-word look-alikes, long lines, CR /
CRLF / LF bodies, follow-ups) the headers and parts read back as they were written."""

import random
import uuid
from datetime import UTC, datetime
from email import message_from_bytes, message_from_string
from email.policy import default
from types import SimpleNamespace

import pytest

from outreach.sending import message as sending_message
from tests.outreach.message_shapes import CONTACTS, SENDERS, STEPS, generated_message

NOW = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)

pytestmark = pytest.mark.django_db  # the suite's session fixtures need the database


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


def _built(monkeypatch, message):
    """(the message's bytes, the headers, text and HTML message_data was given)."""
    given = []
    real = sending_message.message_data

    def spy(headers, text, html, *, smtputf8):
        given.append((list(headers), text, html))
        return real(headers, text, html, smtputf8=smtputf8)

    monkeypatch.setattr(sending_message, "message_data", spy)
    data = sending_message.message_build(**message).data
    return data, *given[0]


def _lines(text):
    """A body as set_content writes it: its lines joined by LF, ending with one (an empty
    body too)."""
    return "\n".join(text.splitlines()) + "\n"


def _reads_back(data, headers, text, html):
    assert b"\n" not in data.replace(b"\r\n", b"")  # CRLF only
    parsed = message_from_bytes(data, policy=default)
    # The headers as a client reads them (UTF-8, which SMTPUTF8 messages carry raw).
    header_block = data.split(b"\r\n\r\n", 1)[0].decode("utf-8")
    read = message_from_string(header_block + "\r\n\r\n", policy=default)
    for name, value in headers:
        if name in ("From", "To"):
            wrote = message_address(value)
            if _mangled_by_the_email_package(wrote.display_name):
                continue
            got = read[name].addresses[0]
            assert got.addr_spec == wrote.addr_spec, (name, value)
            # (the spaces between encoded words are the writer's to choose)
            assert got.display_name.split() == wrote.display_name.split() or "".join(
                got.display_name.split()
            ) == "".join(wrote.display_name.split()), (name, value)
        else:  # the words as written (a leading space is part of the separator)
            # (an encoded-word look-alike in the value is read as one, as it would be)
            as_given = message_from_string(f"{name}: {value}\r\n\r\n", policy=default)
            assert str(read[name]).split() == str(as_given[name]).split(), name
    assert [name for name, _ in read.items()][: len(headers)] == [n for n, _ in headers]
    if html is None:
        assert parsed.get_content_type() == "text/plain"
        assert parsed.get_content().replace("\r\n", "\n") == _lines(text)
        return
    assert parsed.get_content_type() == "multipart/alternative"
    text_part, html_part = parsed.iter_parts()
    assert text_part.get_content().replace("\r\n", "\n") == _lines(text)
    assert html_part.get_content().replace("\r\n", "\n") == _lines(html)


def _mangled_by_the_email_package(name):
    """Known defects of the email package (docs/development.md, "Library code"): a
    name long enough to be folded past 998 characters is folded inside its quotes; an
    encoded-word look-alike inside a non-ASCII name is written bare and read decoded."""
    return (not name.isascii() and "=?" in name) or len(name) > 900


def message_address(value):
    if not isinstance(value, str):
        return value
    return message_from_string(f"To: {value}\r\n\r\n", policy=default)["To"].addresses[0]


def test_generated_messages_read_back_as_written(monkeypatch):
    rng = random.Random(20261121)
    built = 0
    for index in range(300):
        message = generated_message(rng)
        monkeypatch.setattr(sending_message.uuid, "uuid4", lambda index=index: uuid.UUID(int=index))
        try:
            data, headers, text, html = _built(monkeypatch, message)
        except ValueError:  # a non-ASCII sender domain cannot be sent from
            assert "@bü." in message["credential"].from_email
            continue
        _reads_back(data, headers, text, html)
        built += 1
    assert built > 250


@pytest.mark.parametrize("sender", SENDERS)
@pytest.mark.parametrize("step", STEPS)
@pytest.mark.parametrize("contact", CONTACTS)
def test_named_shapes_read_back_as_written(monkeypatch, contact, step, sender):
    thread = [SimpleNamespace(subject="Re: Earlier subject", message_id="a@b.example")]
    credential = SimpleNamespace(from_name=sender[0], from_email=sender[1])
    enrollment = SimpleNamespace(
        pk=uuid.UUID(int=7),
        contact_id=uuid.UUID(int=8),
        contact=SimpleNamespace(fields={}, **contact),
    )
    message = {**COMMON, "credential": credential, "enrollment": enrollment, "thread": thread}
    message["step"] = SimpleNamespace(**step)
    data, headers, text, html = _built(monkeypatch, message)
    _reads_back(data, headers, text, html)
    assert data.startswith(b"From: ")
    parsed = message_from_bytes(data, policy=default)
    assert parsed["Bcc"] is None  # a line break in a name cannot add a header
    assert "=?" not in parsed["List-Unsubscribe"]  # plain: mail clients must find its URLs


COMMON_BYTES = (
    b"From: Bench <bench@sender.example>\r\n"
    b"To: Ada Lovelace <r1@bench.example>\r\n"
    b"Subject: Quick question, Ada\r\n"
    b"Date: Mon, 02 Mar 2026 10:00:00 +0000\r\n"
    b"Message-ID: <0000000000000000000000000000002a@sender.example>\r\n"
    b"List-Unsubscribe: <{unsubscribe}>, <mailto:bench@sender.example?subject=unsubscribe>\r\n"
    b"List-Unsubscribe-Post: List-Unsubscribe=One-Click\r\n"
    b"X-Auto-Response-Suppress: OOF, AutoReply\r\n"
    b"MIME-Version: 1.0\r\n"
    b'Content-Type: multipart/alternative; boundary="===============0000000000000012345=="\r\n'
    b"\r\n"
    b"--===============0000000000000012345==\r\n"
    b'Content-Type: text/plain; charset="utf-8"\r\n'
    b"Content-Transfer-Encoding: 7bit\r\n"
    b"\r\n"
    b"Hi Ada,\r\n\r\nWould Acme like to talk?\r\n\r\nBench\r\n"
    b"\r\n"
    b"--===============0000000000000012345==\r\n"
    b'Content-Type: text/html; charset="utf-8"\r\n'
    b"Content-Transfer-Encoding: 7bit\r\n"
    b"MIME-Version: 1.0\r\n"
    b"\r\n"
    b"<html><body><p>Hi Ada,</p><p>Acme?</p>{pixel}</body></html>\r\n"
    b"\r\n"
    b"--===============0000000000000012345==--\r\n"
)


def test_the_bytes_of_the_common_shape(monkeypatch):
    monkeypatch.setattr(sending_message.uuid, "uuid4", lambda: uuid.UUID(int=42))
    monkeypatch.setattr(random, "randrange", lambda n: 12345)  # the boundary's draw
    message = {**COMMON, "enrollment": _enrollment("Ada", "Lovelace")}
    data, headers, text, html = _built(monkeypatch, message)
    unsubscribe = dict(headers)["List-Unsubscribe"].split(">")[0][1:]
    pixel = html[html.index("<table") : html.index("</body>")]
    expected = COMMON_BYTES.replace(b"{unsubscribe}", unsubscribe.encode())
    assert data == expected.replace(b"{pixel}", pixel.encode())
