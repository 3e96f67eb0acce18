"""Delivery reports of every form, polled from a real Dovecot mailbox, bounce by their
type (docs/sending.md, "Bounce types"; docs/intake.md, "Delivery reports"): a `hard`
one suppresses the contact, a `soft` or `block` one ends the enrollment only; a delay
changes nothing; a report that names no message of ours, or another recipient, changes
nothing and is kept as unmatched."""

from email.utils import format_datetime

import pytest
from django.utils import timezone

from outreach.models.contacts import Contact, Suppression
from outreach.models.intake import UnmatchedReport
from outreach.models.sending import Enrollment
from tests.intake.conftest import requires_dovecot
from tests.intake.factories import first_message, sent_enrollment
from tests.intake.helpers import events
from tests.intake.mail import delivery_report, reply
from tests.intake.test_mailbox import poll, with_imap

pytestmark = [pytest.mark.django_db, requires_dovecot]


@pytest.fixture
def thread(imap_mailbox):
    enrollment = sent_enrollment()
    credential = with_imap(enrollment, imap_mailbox)
    return enrollment, credential, imap_mailbox


def qmail_bounce(*, to: str, recipient: str, message_id: str, reason: str) -> bytes:
    """qmail's plain-text bounce, the original below its copy line."""
    return (
        "From: MAILER-DAEMON@mx.receiver.example\r\n"
        f"To: {to}\r\n"
        "Subject: failure notice\r\n"
        f"Date: {format_datetime(timezone.now())}\r\n"
        "Message-ID: <qmail-bounce-1@mx.receiver.example>\r\n"
        "\r\n"
        "Hi. This is the qmail-send program at mx.receiver.example.\r\n"
        "I'm afraid I wasn't able to deliver your message to the following addresses.\r\n"
        "This is a permanent error; I've given up. Sorry it didn't work out.\r\n"
        "\r\n"
        f"<{recipient}>:\r\n"
        f"{reason}\r\n"
        "\r\n"
        "--- Below this line is a copy of the message.\r\n"
        "\r\n"
        f"From: <{to}>\r\n"
        f"To: <{recipient}>\r\n"
        f"Message-ID: <{message_id}>\r\n"
        "Subject: Hello\r\n"
        "\r\n"
        "Hello there\r\n"
    ).encode()


def _contact(enrollment) -> Contact:
    return Contact.objects.get(pk=enrollment.contact_id)


@pytest.mark.parametrize(
    ("status", "diagnostic", "type_", "category"),
    [
        ("5.2.2", "smtp; 552 5.2.2 Mailbox full", "soft", "mailbox_full"),
        (
            "5.7.26",
            "smtp; 550 5.7.26 Unauthenticated email from sender.example is not accepted due "
            "to domain's DMARC policy",
            "block",
            "security_error",
        ),
    ],
)
def test_a_soft_or_block_report_bounces_without_suppressing(
    thread, status, diagnostic, type_, category
):
    enrollment, credential, mailbox = thread
    mailbox.append(
        delivery_report(
            to=credential.from_email,
            original_message_id=first_message(enrollment).message_id,
            recipient=enrollment.contact.email,
            status=status,
            diagnostic=diagnostic,
        )
    )
    assert [o.kind for o in poll(credential).outcomes] == ["bounced"]
    enrollment.refresh_from_db()
    assert enrollment.status == Enrollment.Status.BOUNCED
    assert (enrollment.bounce_type, enrollment.bounce_category) == (type_, category)
    assert _contact(enrollment).bounced_at is None
    assert not Suppression.objects.filter(email_lower=enrollment.contact.email_lower).exists()
    credential.refresh_from_db()
    assert credential.bounced_count == 1
    [event] = events("enrollment.bounced")
    assert (event.data["bounce_type"], event.data["bounce_category"]) == (type_, category)


def test_a_plain_text_qmail_bounce_is_read_and_suppresses_a_hard_failure(thread):
    enrollment, credential, mailbox = thread
    mailbox.append(
        qmail_bounce(
            to=credential.from_email,
            recipient=enrollment.contact.email,
            message_id=first_message(enrollment).message_id,
            reason="Sorry, no mailbox here by that name. (#5.1.1)",
        )
    )
    assert [o.kind for o in poll(credential).outcomes] == ["bounced"]
    enrollment.refresh_from_db()
    assert (enrollment.bounce_type, enrollment.bounce_category) == ("hard", "user_unknown")
    assert "no mailbox here by that name" in enrollment.bounce_reason
    assert _contact(enrollment).bounced_at is not None


def test_a_delayed_report_changes_nothing(thread):
    enrollment, credential, mailbox = thread
    mailbox.append(
        delivery_report(
            to=credential.from_email,
            original_message_id=first_message(enrollment).message_id,
            recipient=enrollment.contact.email,
            status="4.2.2",
            diagnostic="smtp; 452 4.2.2 Mailbox full, will retry",
        )
    )
    assert [o.kind for o in poll(credential).outcomes] == ["ignored"]
    enrollment.refresh_from_db()
    assert enrollment.status == Enrollment.Status.SENT
    assert events() == []
    assert not UnmatchedReport.objects.exists()


@pytest.mark.parametrize("form", ["dsn", "qmail"])
def test_a_forged_bounce_changes_nothing_and_is_kept_as_unmatched(thread, form):
    enrollment, credential, mailbox = thread
    forged_id = "never-sent-by-us@sender.example"
    recipient = enrollment.contact.email
    if form == "dsn":
        raw = delivery_report(
            to=credential.from_email, original_message_id=forged_id, recipient=recipient
        )
    else:
        raw = qmail_bounce(
            to=credential.from_email,
            recipient=recipient,
            message_id=forged_id,
            reason="Sorry, no mailbox here by that name. (#5.1.1)",
        )
    mailbox.append(raw)

    assert [o.kind for o in poll(credential).outcomes] == ["unmatched"]
    enrollment.refresh_from_db()
    assert enrollment.status == Enrollment.Status.SENT
    assert _contact(enrollment).bounced_at is None
    assert not Suppression.objects.exists()
    assert events() == []
    [kept] = UnmatchedReport.objects.all()
    assert kept.credential_id == credential.pk
    assert kept.account_id == credential.account_id
    assert kept.detail == "delivery report for an unknown message"
    assert recipient.lower() in kept.recipients
    assert (kept.bounce_type, kept.bounce_category) == ("hard", "user_unknown")


def test_a_person_writing_about_an_undeliverable_message_is_a_reply(thread):
    enrollment, credential, mailbox = thread
    sent = first_message(enrollment)
    raw = reply(
        sender=enrollment.contact.email,
        to=credential.from_email,
        in_reply_to=sent.message_id,
        subject="Re: Undeliverable: Hello",
    )
    mailbox.append(raw)
    assert [o.kind for o in poll(credential).outcomes] == ["replied"]
    assert _contact(enrollment).bounced_at is None


def test_the_same_report_twice_bounces_once_and_emits_once(thread):
    enrollment, credential, mailbox = thread
    raw = delivery_report(
        to=credential.from_email,
        original_message_id=first_message(enrollment).message_id,
        recipient=enrollment.contact.email,
        status="5.2.2",
        diagnostic="smtp; 552 5.2.2 Mailbox full",
    )
    mailbox.append(raw)
    mailbox.append(raw)
    assert [o.kind for o in poll(credential).outcomes] == ["bounced", "ignored"]
    assert len(events("enrollment.bounced")) == 1
    credential.refresh_from_db()
    assert credential.bounced_count == 1


def test_a_forged_report_read_twice_is_kept_once(thread):
    enrollment, credential, mailbox = thread
    raw = delivery_report(
        to=credential.from_email,
        original_message_id="never-sent-by-us@sender.example",
        recipient=enrollment.contact.email,
    )
    mailbox.append(raw)
    mailbox.append(raw)
    assert [o.kind for o in poll(credential).outcomes] == ["unmatched", "unmatched"]
    assert UnmatchedReport.objects.count() == 1
