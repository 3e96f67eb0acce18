"""message_parse never raises and stays within its bounds, whatever the bytes."""

from datetime import UTC, datetime
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from outreach.conversations.html import html_sanitize
from outreach.conversations.labels import message_classify
from outreach.conversations.parse import ParsedMessage, message_parse

MAIL = Path(__file__).parent / "mail"
CORPUS = sorted(p.read_bytes() for p in MAIL.glob("*.eml"))
RECEIVED = datetime(2026, 3, 2, 12, tzinfo=UTC)
# Derandomized: the same examples on every run, so a failure reproduces.
PROPERTY = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)


def check(raw: bytes, max_chars: int) -> ParsedMessage:
    parsed = message_parse(raw, max_chars=max_chars)
    assert isinstance(parsed, ParsedMessage)
    assert len(parsed.text) <= max_chars
    assert len(parsed.new_text) <= max_chars
    assert len(parsed.html) <= max_chars
    assert parsed.html == html_sanitize(parsed.html)
    assert parsed.from_email == parsed.from_email.lower()
    assert parsed.date is None or parsed.date.tzinfo is not None
    assert all(isinstance(d, str) and d for d in parsed.defects)
    message_classify(parsed, received_at=RECEIVED)  # and labels never raise either
    return parsed


@PROPERTY
@given(st.binary(max_size=4000), st.integers(min_value=0, max_value=5000))
def test_arbitrary_bytes(raw, max_chars):
    check(raw, max_chars)


# Bytes that look like mail: header lines, boundaries, encodings and charsets.
_FRAGMENTS = st.sampled_from(
    [
        b"From: =?utf-8?B?w4lsb2RpZQ==?= <a@b>\r\n",
        b"Subject: =?iso-2022-jp?B?GyRCJDMbKEI=?= =?x?Q?=ZZ?=\r\n",
        b'Content-Type: multipart/mixed; boundary="b"\r\n',
        b"Content-Type: multipart/alternative; boundary=b\r\n",
        b"Content-Type: text/html; charset=utf-7\r\n",
        b"Content-Type: text/plain; charset*=utf-8''%C3; format=flowed; delsp=yes\r\n",
        b"Content-Type: message/rfc822\r\n",
        b"Content-Transfer-Encoding: base64\r\n",
        b"Content-Transfer-Encoding: quoted-printable\r\n",
        b"Content-Disposition: attachment; filename*0*=utf-8''%E2; filename*1=x\r\n",
        b"Date: Mon, 99 Foo 99999 99:99:99 +9999\r\n",
        b"References: <<<>>> <a@b\r\n",
        b"\r\n",
        b"--b\r\n",
        b"--b--\r\n",
        b"=C3=A9=\r\n",
        b"SGVsbG8=\r\n",
        b"<blockquote type=cite><div class=gmail_quote><a href=javascript:x>",
        b"<![CDATA[<!-- <script>",
        b"> On Mon, 2 Mar 2026, X wrote:\r\n",
        b"\xff\xfe\x00\x1b$B",
    ]
)


@PROPERTY
@given(st.lists(_FRAGMENTS | st.binary(max_size=40), max_size=60), st.integers(0, 3000))
def test_mail_shaped_bytes(chunks, max_chars):
    check(b"".join(chunks), max_chars)


@PROPERTY
@given(
    st.sampled_from(CORPUS),
    st.lists(
        st.tuples(st.floats(0, 1), st.integers(0, 40), st.binary(max_size=20)),
        min_size=1,
        max_size=8,
    ),
    st.integers(min_value=0, max_value=4000),
)
def test_mutated_corpus_files(raw, edits, max_chars):
    data = bytearray(raw)
    for where, cut, insert in edits:
        at = int(where * len(data))
        data[at : at + cut] = insert  # delete a few bytes, insert others
    check(bytes(data), max_chars)


@PROPERTY
@given(st.sampled_from(CORPUS), st.floats(0, 1))
def test_corpus_files_cut_anywhere(raw, where):
    check(raw[: int(where * len(raw))], 2000)


def test_deep_nesting_does_not_raise():
    raw = b"Content-Type: multipart/mixed; boundary=b0\r\n\r\n"
    for i in range(1, 400):
        raw += b"--b%d\r\nContent-Type: multipart/mixed; boundary=b%d\r\n\r\n" % (i - 1, i)
    parsed = check(raw, 100)
    assert parsed.defects


def test_many_parts_are_bounded():
    parts = b"".join(
        b"--b\r\nContent-Type: application/octet-stream\r\n\r\nx\r\n" for _ in range(700)
    )
    raw = b"Content-Type: multipart/mixed; boundary=b\r\n\r\n" + parts + b"--b--\r\n"
    parsed = check(raw, 100)
    assert len(parsed.attachments) == 500
    assert "too many parts" in parsed.defects
