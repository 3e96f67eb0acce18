"""No message stops a mailbox's intake, and none stalls the poller (issue 50): the probes
that did, each delivered to a real Dovecot and polled, followed by a good reply that must
still be read; then mutated real messages through the whole poll (hypothesis)."""

import base64
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from outreach.conversations import labels
from outreach.intake.tasks import intake_poll_mailbox
from outreach.models.conversations import Reply
from tests.foundation import test_metrics
from tests.foundation.test_metrics import scrape, value
from tests.intake import test_mailbox
from tests.intake.conftest import requires_dovecot
from tests.intake.factories import first_message
from tests.intake.mail import delivery_report, reply
from tests.intake.test_mailbox import poll

pytestmark = [pytest.mark.django_db, requires_dovecot]

# Fixtures shared with the mailbox and metrics tests.
thread = test_mailbox.thread
token = test_metrics.token

CORPUS = sorted((Path(__file__).parent.parent / "conversations" / "mail").glob("*.eml"))


def threaded(enrollment, raw: bytes) -> bytes:
    """`raw` as an answer to the enrollment's first email (In-Reply-To on top)."""
    return f"In-Reply-To: <{first_message(enrollment).message_id}>\r\n".encode() + raw


def mime_reply(enrollment, credential, rest: bytes, *, subject: str = "Re: Hello") -> bytes:
    """A threaded reply from the contact: its From, To, Subject, then `rest` (the MIME
    headers and body)."""
    return threaded(
        enrollment,
        f"From: Contact <{enrollment.contact.email}>\r\n"
        f"To: {credential.from_email}\r\n"
        f"Subject: {subject}\r\nMIME-Version: 1.0\r\n".encode()
        + rest,
    )


def html_reply(enrollment, credential, html: bytes, *, charset: str = "utf-8") -> bytes:
    return mime_reply(
        enrollment,
        credential,
        f"Content-Type: text/html; charset={charset}\r\n\r\n".encode() + html,
    )


def nested(depth: int, inner: bytes = b"") -> bytes:
    """A body of `depth` multiparts each inside the last (never closed)."""
    body = b"".join(
        b"--n%d\r\nContent-Type: multipart/mixed; boundary=n%d\r\n\r\n" % (i, i + 1)
        for i in range(depth)
    )
    return body + inner


def good_reply_after(enrollment, credential, mailbox, body: str) -> None:
    mailbox.append(
        reply(
            sender=enrollment.contact.email,
            to=credential.from_email,
            in_reply_to=first_message(enrollment).message_id,
            body=body,
        )
    )


def assert_good_reply_read(credential, result, body: str, uid: int) -> None:
    """The good reply (the last message, `uid`) was kept, and the poll moved past it."""
    assert result.outcomes[-1].uid == uid and result.outcomes[-1].kind in ("replied", "kept")
    assert Reply.objects.filter(new_text=body).exists()
    credential.refresh_from_db()
    assert credential.imap_last_uid == uid
    assert credential.imap_last_polled_at is not None


def test_raw_utf8_in_a_strangers_message_id_is_unmatched_and_the_next_reply_read(thread):
    enrollment, credential, mailbox = thread
    mailbox.append(
        "From: Someone <someone@else.example>\r\n"
        f"To: {credential.from_email}\r\n"
        "Subject: Hi\r\n"
        "Message-ID: <caf\u00e9-\u00fc@else.example>\r\n"
        "In-Reply-To: <r\u00e9@else.example>\r\n\r\nHello\r\n".encode()
    )
    good_reply_after(enrollment, credential, mailbox, "Still read")
    result = poll(credential)
    assert [o.kind for o in result.outcomes] == ["unmatched", "replied"]
    assert_good_reply_read(credential, result, "Still read", 2)
    assert credential.imap_last_error == ""


def test_a_delivery_report_of_3000_nested_multiparts_is_read_as_far_as_the_bound(thread):
    enrollment, credential, mailbox = thread
    report = delivery_report(
        to=credential.from_email,
        original_message_id=first_message(enrollment).message_id,
        recipient=enrollment.contact.email,
    )
    # The nesting inside the report's first part, before its status.
    at = report.index(b"Content-Type: text/plain; charset=us-ascii")
    report = (
        report[:at]
        + b"Content-Type: multipart/mixed; boundary=n0\r\n\r\n"
        + nested(3000)
        + b"\r\n"
        + report[at:]
    )
    mailbox.append(report)
    good_reply_after(enrollment, credential, mailbox, "After the report")
    result = poll(credential)
    assert [o.kind for o in result.outcomes] == ["ignored", "replied"]
    assert result.outcomes[0].detail == "delivery report, not permanent (no status)"
    assert_good_reply_read(credential, result, "After the report", 2)


def test_a_reply_of_3000_nested_multiparts_is_kept_cut(thread):
    enrollment, credential, mailbox = thread
    mailbox.append(
        mime_reply(
            enrollment,
            credential,
            b"Content-Type: multipart/mixed; boundary=n0\r\n\r\n"
            + nested(3000, b"--n3000\r\nContent-Type: text/plain\r\n\r\nDeep\r\n"),
        )
    )
    good_reply_after(enrollment, credential, mailbox, "After the deep one")
    result = poll(credential)
    assert [o.kind for o in result.outcomes] == ["replied", "kept"]
    deep = Reply.objects.get(message_id__startswith="imap-")
    assert "more than 100 nested parts: cut" in deep.defects
    assert_good_reply_read(credential, result, "After the deep one", 2)


def test_nul_in_the_text_and_in_an_attachment_name_is_not_stored(thread):
    enrollment, credential, mailbox = thread
    mailbox.append(
        mime_reply(
            enrollment,
            credential,
            # A NUL in an encoded word; a lone surrogate from an escape in a bare word.
            subject="=?utf-8?q?Re:_Hel=00lo?= \\ud800",
            rest=b'Content-Type: multipart/mixed; boundary="b"\r\n\r\n'
            b"--b\r\nContent-Type: text/plain; charset=utf-8\r\n"
            b"Content-Transfer-Encoding: quoted-printable\r\n\r\n"
            b"Tues=00day works.\r\n"
            b"--b\r\nContent-Type: application/pdf\r\n"
            b"Content-Disposition: attachment; filename*=utf-8''quote%00.pdf\r\n"
            b"\r\n%PDF\r\n"
            b"--b\r\nContent-Type: application/pdf\r\n"
            b'Content-Disposition: attachment; filename="=?utf-8?q?plan=00.pdf?="\r\n'
            b"\r\n%PDF\r\n--b--\r\n",
        )
    )
    good_reply_after(enrollment, credential, mailbox, "After the NUL")
    result = poll(credential)
    assert [o.kind for o in result.outcomes] == ["replied", "kept"]
    kept = Reply.objects.get(message_id__startswith="imap-")
    assert kept.text == "Tuesday works." and kept.subject == "Re: Hello \ufffd"
    assert [a["filename"] for a in kept.attachments] == ["quote.pdf", "plan.pdf"]
    assert_good_reply_read(credential, result, "After the NUL", 2)
    assert credential.imap_last_error == ""


def test_a_punycode_charset_is_an_unknown_charset(thread):
    enrollment, credential, mailbox = thread
    mailbox.append(
        html_reply(enrollment, credential, b"<p>Thanks, Tuesday works.</p>", charset="punycode")
    )
    assert [o.kind for o in poll(credential).outcomes] == ["replied"]
    kept = Reply.objects.get()
    assert kept.new_text == "Thanks, Tuesday works."
    assert "unknown charset punycode" in kept.defects


@pytest.mark.parametrize("junk", [b"</", b"<!--", b"<a", b"<div>"])
def test_hostile_html_is_rendered_without_its_junk(thread, junk):
    """300 KB of markup that took html.parser (or html5ever, for the nesting) seconds to
    minutes; the text is what the contact wrote."""
    enrollment, credential, mailbox = thread
    html = b"<p>Thanks, Tuesday works.</p>" + junk * (300_000 // len(junk))
    mailbox.append(html_reply(enrollment, credential, html))
    good_reply_after(enrollment, credential, mailbox, "After the HTML")
    result = poll(credential)
    assert [o.kind for o in result.outcomes] == ["replied", "kept"]
    kept = Reply.objects.get(message_id__startswith="imap-")
    assert kept.new_text == "Thanks, Tuesday works."
    assert_good_reply_read(credential, result, "After the HTML", 2)


def test_a_header_over_the_cap_is_read_as_far_as_the_cap(thread, settings):
    settings.IMAP_MAX_HEADER_BYTES = 4096
    enrollment, credential, mailbox = thread
    # Its In-Reply-To lies past the cap: only what fits is read, so nothing names our
    # email, and the stranger is no contact.
    mailbox.append(
        f"From: Someone <someone@else.example>\r\nTo: {credential.from_email}\r\n".encode()
        + b"X-Filler: " + b"x" * 50_000 + b"\r\n"
        + f"In-Reply-To: <{first_message(enrollment).message_id}>\r\n\r\nHi\r\n".encode()
    )  # fmt: skip
    good_reply_after(enrollment, credential, mailbox, "After the big header")
    result = poll(credential)
    assert [o.kind for o in result.outcomes] == ["unmatched", "replied"]
    assert_good_reply_read(credential, result, "After the big header", 2)


def test_a_message_that_raises_is_unreadable_named_on_the_credential_and_counted(
    thread,
    client,
    token,
):
    """A delivery report whose attached headers are base64 of 3,000 nested multiparts
    (the bounce parser reads them whole): the poll goes past it."""
    enrollment, credential, mailbox = thread
    bomb = base64.encodebytes(b"Content-Type: multipart/mixed; boundary=n0\r\n\r\n" + nested(3000))
    report = delivery_report(
        to=credential.from_email,
        original_message_id=first_message(enrollment).message_id,
        recipient=enrollment.contact.email,
    )
    at = report.index(b"Content-Type: text/rfc822-headers")
    end = report.index(b"--=_report_boundary_42--")
    report = (
        report[:at]
        + b"Content-Type: text/rfc822-headers\r\nContent-Transfer-Encoding: base64\r\n\r\n"
        + bomb
        + b"\r\n"
        + report[end:]
    )
    mailbox.append(report)
    good_reply_after(enrollment, credential, mailbox, "After the bomb")
    before = value(
        scrape(client), "outreach_imap_polls", "outreach_imap_polls_total", outcome="error"
    )

    done = intake_poll_mailbox(str(credential.pk))

    assert done["unreadable"] == 1 and done["replied"] == 1 and done["error"] == ""
    credential.refresh_from_db()
    assert credential.imap_last_uid == 2
    assert credential.imap_last_error.startswith("uid 1: RecursionError")
    assert credential.imap_last_error_at is not None
    assert Reply.objects.get().new_text == "After the bomb"
    after = value(
        scrape(client), "outreach_imap_polls", "outreach_imap_polls_total", outcome="error"
    )
    assert after == before + 1
    # The next poll, with nothing wrong, clears the error.
    good_reply_after(enrollment, credential, mailbox, "Later")
    assert [o.kind for o in poll(credential).outcomes] == ["kept"]
    credential.refresh_from_db()
    assert credential.imap_last_error == ""


def test_a_matched_message_whose_keeping_raises_is_kept_unparsed(thread, monkeypatch):
    """Keeping a reply raises (a fault put at one seam: labelling its text): it is kept
    without its body, the reason as its defect, and named on the credential."""
    enrollment, credential, mailbox = thread
    classify = labels.message_classify

    def failing(parsed, **kwargs):
        if "poison" in parsed.text:
            raise ValueError("cannot label this")
        return classify(parsed, **kwargs)

    monkeypatch.setattr(labels, "message_classify", failing)
    good_reply_after(enrollment, credential, mailbox, "poison")
    good_reply_after(enrollment, credential, mailbox, "After the bad one")
    result = poll(credential)
    assert [o.kind for o in result.outcomes] == ["replied", "kept"]
    unparsed = Reply.objects.get(new_text="")
    assert unparsed.defects == ["unreadable: ValueError: cannot label this"]
    assert unparsed.from_email == enrollment.contact.email.lower()
    assert_good_reply_read(credential, result, "After the bad one", 2)
    assert credential.imap_last_error == "uid 1: ValueError: cannot label this"


# --- mutated real messages through the whole poll --------------------------------------

_HOSTILE = st.sampled_from(
    [
        b"Content-Type: text/plain; charset=punycode\r\n",
        b"Content-Type: text/html; charset=rot13\r\n",
        b"Content-Transfer-Encoding: quoted-printable\r\n\r\n=00=ED=A0=80\r\n",
        b"Message-ID: <\xc3\xa9\xff@x>\r\n",
        b"In-Reply-To: <\xc3\xa9@x>\r\n",
        b"Subject: =?utf-8?q?=00?= =?utf-8?b?7aCA?=\r\n",
        b"Content-Disposition: attachment; filename*=utf-8''%00%ED%A0%80\r\n",
        b"Content-Type: multipart/mixed; boundary=n0\r\n\r\n" + nested(300),
        b"Content-Type: message/rfc822\r\n\r\n" * 150,
        b"</" * 2000 + b"<div>" * 500,
        b"\r\n\r\n",
        b"--b\r\n",
    ]
)


@settings(
    max_examples=12,
    deadline=None,
    derandomize=True,  # the same examples on every run, so a failure reproduces
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    source=st.sampled_from(CORPUS),
    edits=st.lists(
        st.tuples(st.floats(0, 1), st.integers(0, 40), _HOSTILE | st.binary(max_size=20)),
        min_size=1,
        max_size=6,
    ),
)
def test_mutated_real_messages_never_stop_the_poll(thread, source, edits):
    enrollment, credential, mailbox = thread
    data = bytearray(threaded(enrollment, source.read_bytes()))
    for where, cut, insert in edits:
        at = int(where * len(data))
        data[at : at + cut] = insert.replace(b"\x00", b"")  # IMAP literals hold no NUL
    mailbox.append(bytes(data))
    credential.refresh_from_db()
    last_uid = credential.imap_last_uid or 0
    body = f"Good reply, uid {last_uid + 2}"
    good_reply_after(enrollment, credential, mailbox, body)

    result = poll(credential)

    assert len(result.outcomes) == 2
    assert_good_reply_read(credential, result, body, last_uid + 2)
