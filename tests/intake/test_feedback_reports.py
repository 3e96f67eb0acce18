"""Feedback reports (ARF, RFC 5965; Microsoft's JMRP) in a mailbox (docs/intake.md,
step 0): real reports of the feedback loops of Yahoo, Microsoft, Amazon SES, Return
Path, abusix and others (tests/intake/feedback_corpus, Sisimai's set-of-emails,
BSD-2-Clause), parsed as they are, then polled from a real Dovecot about a message we
sent: a complaint unsubscribes the contact and counts against the mailbox that sent it;
anything else changes nothing."""

from pathlib import Path

import pytest
from django.utils import timezone

from outreach.conversations.parse import message_from_bytes_bounded
from outreach.intake.feedback import feedback_report_parse, is_feedback_report
from outreach.models.contacts import Contact, Suppression
from outreach.models.reputation import MailboxComplaint
from outreach.models.sending import Enrollment
from tests.intake.conftest import requires_dovecot
from tests.intake.factories import first_message, sent_enrollment
from tests.intake.helpers import events
from tests.intake.test_mailbox import poll, with_imap

CORPUS = Path(__file__).parent / "feedback_corpus"

# file: (Feedback-Type, the original's Message-IDs, Original-Rcpt-To), as the files say.
EXPECTED = {
    "bsd-arf-01.eml": ("abuse", [], ()),  # the original redacted: no Message-ID
    "bsd-arf-02.eml": (
        "abuse",
        ["000000000000000000000000.smtp@example.com"],
        ("this-local-part-does-not-exist-on-yahoo@yahoo.com",),
    ),
    "bsd-arf-11.eml": ("abuse", ["ffffffffffffffffffffffffff0000000000@example.net"], ()),
    "bsd-arf-12.eml": ("opt-out", ["0000000000000000000000000@example.net"], ()),
    "bsd-arf-14.eml": (
        "abuse",
        ["2222222222222222-00000000-eeee-eeee-ffff-222222222222-111111@email.amazonses.com"],
        ("kijitora@y.example.com",),
    ),
    "bsd-arf-15.eml": ("abuse", ["ffffffffffffffffffffffff00000000@example.net"], ()),
    "bsd-arf-16.eml": (
        "abuse",
        ["ffffffffffffffffffffffff0000000@example.jp"],
        (
            "kijitora@example.com",
            "sironeko@example.com",
            "mikeneko@example.com",
            "sabatora@example.com",
            "sirokiji@example.org",
            "kuroneko@example.com",
            "sabineko@example.com",
        ),
    ),
    "bsd-arf-17.eml": (
        "abuse",
        ["EEEEEEEE-0000-0000-0000-EEEEEEEE2222@example.net"],
        ("kijitora@example.com", "sabatora@example.net"),
    ),
    "bsd-arf-18.eml": (
        "auth-failure",
        ["000000002.2222222.1500000000022@example.net"],
        ("kijitora@example.com",),
    ),
    "bsd-arf-19.eml": ("auth-failure", ["000000000.2222222.0000000000002@example.net"], ()),
    "bsd-arf-20.eml": ("auth-failure", ["000000000eee@example.net"], ()),
    "bsd-arf-21.eml": ("abuse", ["00000000000000000000000022222222@example.net"], ()),
    # Microsoft's JMRP: no report part, the recipient in the original's own header.
    "bsd-arf-22.eml": (
        "abuse",
        ["0000000000fffffffff0000000000000@example.com"],
        ("kijitora@example.com",),
    ),
    "bsd-arf-23.eml": (
        "abuse",
        ["0000000000fffffffff0000000000000@example.com"],
        ("kijitora@example.com",),
    ),
    "bsd-arf-24.eml": (
        "abuse",
        ["0000000000fffffffff0000000000000@example.com"],
        ("kijitora@example.com",),
    ),
    "bsd-arf-25.eml": ("abuse", [], ("hashed@example.com",)),  # Rackspace: "REDACTED"
    "dos-arf-01.eml": ("abuse", [], ()),
    "mac-arf-01.eml": ("abuse", [], ()),
}


def _parsed(name: str):
    message, _ = message_from_bytes_bounded((CORPUS / name).read_bytes())
    return message


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_report_of_the_corpus_is_read_as_the_loop_wrote_it(name):
    message = _parsed(name)
    assert is_feedback_report(message)
    report = feedback_report_parse(message)
    feedback_type, ids, recipients = EXPECTED[name]
    assert (report.feedback_type, report.original_message_ids, report.recipients) == (
        feedback_type,
        ids,
        recipients,
    )


def test_the_corpus_is_read_whole():
    names = {p.name for p in CORPUS.glob("*.eml")}
    assert names - set(EXPECTED) == {"bsd-arf-26.eml"}  # below
    assert (CORPUS / "LICENSE").exists()


def test_apple_mails_unsubscribe_message_is_no_feedback_report():
    # Mail to a List-Unsubscribe address, not a provider's report.
    assert not is_feedback_report(_parsed("bsd-arf-26.eml"))


# ------------------------------------------------------------ polled from a mailbox


def about(name: str, *, message_id: str, recipient: str | None = None) -> bytes:
    """The corpus report `name` as the loop would write it about our message: the
    original's Message-ID made ours, each recipient it names made `recipient`."""
    raw = (CORPUS / name).read_bytes()
    _, ids, recipients = EXPECTED[name]
    for original in ids:
        raw = raw.replace(original.encode(), message_id.encode())
    for named in recipients if recipient is not None else ():
        raw = raw.replace(named.encode(), recipient.encode())
    return raw


@pytest.fixture
def thread(imap_mailbox):
    enrollment = sent_enrollment()
    credential = with_imap(enrollment, imap_mailbox)
    return enrollment, credential, imap_mailbox


def _complaints(enrollment) -> int:
    return MailboxComplaint.objects.filter(credential_id=enrollment.credential_id).count()


@pytest.mark.parametrize("name", ["bsd-arf-02.eml", "bsd-arf-14.eml", "bsd-arf-22.eml"])
@pytest.mark.django_db
@requires_dovecot
def test_a_loops_complaint_unsubscribes_the_contact_and_counts_against_the_sender(thread, name):
    enrollment, credential, mailbox = thread
    sent = first_message(enrollment)
    mailbox.append(about(name, message_id=sent.message_id, recipient=sent.to_email))

    result = poll(credential)

    assert [(o.kind, o.enrollment_id) for o in result.outcomes] == [
        ("complained", str(enrollment.pk))
    ]
    enrollment.refresh_from_db()
    assert enrollment.status == Enrollment.Status.UNSUBSCRIBED
    contact = Contact.objects.get(pk=enrollment.contact_id)
    assert contact.unsubscribed_at is not None
    assert Suppression.objects.get(email_lower=contact.email_lower).reason == "complained"
    assert _complaints(enrollment) == 1
    assert len(events("enrollment.unsubscribed")) == 1


@pytest.mark.django_db
@requires_dovecot
def test_the_same_complaint_twice_counts_once(thread):
    enrollment, credential, mailbox = thread
    sent = first_message(enrollment)
    mailbox.append(about("bsd-arf-02.eml", message_id=sent.message_id, recipient=sent.to_email))
    mailbox.append(about("bsd-arf-22.eml", message_id=sent.message_id, recipient=sent.to_email))

    result = poll(credential)

    assert [o.kind for o in result.outcomes] == ["complained", "ignored"]
    assert result.outcomes[1].detail == "contact already unsubscribed"
    assert _complaints(enrollment) == 1
    assert len(events("enrollment.unsubscribed")) == 1


@pytest.mark.django_db
@requires_dovecot
def test_a_complaint_about_a_finished_sequence_still_counts(thread):
    enrollment, credential, mailbox = thread
    Enrollment.objects.filter(pk=enrollment.pk).update(
        status=Enrollment.Status.COMPLETED, next_send_at=None
    )
    sent = first_message(enrollment)
    mailbox.append(about("bsd-arf-14.eml", message_id=sent.message_id, recipient=sent.to_email))

    result = poll(credential)

    assert [o.kind for o in result.outcomes] == ["complained"]
    assert Contact.objects.get(pk=enrollment.contact_id).unsubscribed_at is not None
    assert _complaints(enrollment) == 1
    assert events("enrollment.unsubscribed") == []  # nothing active to move


@pytest.mark.django_db
@requires_dovecot
def test_a_redacted_recipient_of_the_same_domain_is_believed(thread):
    enrollment, credential, mailbox = thread
    sent = first_message(enrollment)
    redacted = "redacted@" + sent.to_email.rpartition("@")[2]
    mailbox.append(about("bsd-arf-02.eml", message_id=sent.message_id, recipient=redacted))

    assert [o.kind for o in poll(credential).outcomes] == ["complained"]


@pytest.mark.django_db
@requires_dovecot
def test_a_report_about_someone_of_another_domain_changes_nothing(thread):
    enrollment, credential, mailbox = thread
    sent = first_message(enrollment)
    mailbox.append(
        about("bsd-arf-17.eml", message_id=sent.message_id, recipient="someone@else.example")
    )

    result = poll(credential)

    assert [o.kind for o in result.outcomes] == ["unmatched"]
    assert "someone@else.example" in result.outcomes[0].detail
    assert Contact.objects.get(pk=enrollment.contact_id).unsubscribed_at is None
    assert _complaints(enrollment) == 0


@pytest.mark.django_db
@requires_dovecot
def test_reports_we_cannot_trace_or_that_are_no_complaint_change_nothing(thread):
    enrollment, credential, mailbox = thread
    sent = first_message(enrollment)
    mailbox.append((CORPUS / "bsd-arf-15.eml").read_bytes())  # another sender's message
    mailbox.append((CORPUS / "bsd-arf-25.eml").read_bytes())  # the original redacted
    mailbox.append(about("bsd-arf-18.eml", message_id=sent.message_id, recipient=sent.to_email))

    result = poll(credential)

    assert [(o.kind, o.detail) for o in result.outcomes] == [
        ("unmatched", "feedback report for an unknown message"),
        ("unmatched", "feedback report for an unknown message"),
        ("ignored", "feedback report of type auth-failure: not a complaint"),
    ]
    assert Contact.objects.get(pk=enrollment.contact_id).unsubscribed_at is None
    assert _complaints(enrollment) == 0


@pytest.mark.django_db
@requires_dovecot
def test_an_opt_out_unsubscribes_without_a_complaint(thread):
    enrollment, credential, mailbox = thread
    sent = first_message(enrollment)
    mailbox.append(about("bsd-arf-12.eml", message_id=sent.message_id))

    result = poll(credential)

    assert [o.kind for o in result.outcomes] == ["unsubscribed"]
    contact = Contact.objects.get(pk=enrollment.contact_id)
    assert Suppression.objects.get(email_lower=contact.email_lower).reason == "unsubscribed"
    assert _complaints(enrollment) == 0


@pytest.mark.django_db
@requires_dovecot
def test_a_broken_feedback_report_is_reported_and_the_poll_goes_on(thread):
    enrollment, credential, mailbox = thread
    sent = first_message(enrollment)
    broken = (
        "From: feedback@arf.mail.example\r\n"
        "To: fbl@sender.example\r\n"
        f"Date: {timezone.now():%a, %d %b %Y %H:%M:%S +0000}\r\n"
        "Subject: report\r\n"
        "Content-Type: multipart/report; report-type=feedback-report\r\n"  # no boundary
        "\r\n"
        "Feedback-Type: abuse\r\n\r\n\x00\xff garbage\r\n"
    ).encode("latin-1")
    mailbox.append(broken)
    mailbox.append(about("bsd-arf-02.eml", message_id=sent.message_id, recipient=sent.to_email))

    result = poll(credential)

    assert [(o.kind, o.detail) for o in result.outcomes] == [
        ("ignored", "feedback report of type none given: not a complaint"),
        ("complained", "feedback report (abuse)"),
    ]
