"""IMAP polling against a real Dovecot: replies, auto-replies, delivery reports."""

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from outreach.intake.beat import intake_poll_mailboxes
from outreach.intake.mailbox import mailbox_poll
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Enrollment
from tests.intake.conftest import requires_dovecot
from tests.intake.factories import first_message, sent_enrollment
from tests.intake.helpers import events
from tests.intake.mail import delivered, delivery_report, gmail_results, reply
from tests.support.ports import free_port

pytestmark = [pytest.mark.django_db, requires_dovecot]


def with_imap(enrollment, mailbox, **overrides) -> SmtpCredential:
    credential = SmtpCredential.objects.get(pk=enrollment.credential_id)
    credential.imap_host = mailbox.host
    credential.imap_port = mailbox.port
    credential.imap_username = mailbox.username
    credential.imap_password = mailbox.password
    credential.imap_security = "none"
    for name, value in overrides.items():
        setattr(credential, name, value)
    credential.save()
    return credential


@pytest.fixture
def thread(imap_mailbox):
    """A contact sent step 1 of 3 from a mailbox with IMAP settings."""
    enrollment = sent_enrollment()
    credential = with_imap(enrollment, imap_mailbox)
    return enrollment, credential, imap_mailbox


def poll(credential):
    credential.refresh_from_db()
    result = mailbox_poll(credential=credential)
    assert result.error == "", result.error
    return result


def test_it_marks_a_reply_by_in_reply_to_and_stops_the_sequence(thread):
    enrollment, credential, mailbox = thread
    sent = first_message(enrollment)
    mailbox.append(
        reply(
            sender=enrollment.contact.email, to=credential.from_email, in_reply_to=sent.message_id
        )
    )

    result = poll(credential)
    assert [o.kind for o in result.outcomes] == ["replied"]
    enrollment.refresh_from_db()
    assert enrollment.status == Enrollment.Status.REPLIED
    assert enrollment.replied_at is not None
    assert enrollment.next_send_at is None
    [event] = events("enrollment.replied")
    assert event.data["status"] == "replied"
    assert event.data["replied_at"] == enrollment.replied_at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert event.data["enrollment_id"] == str(enrollment.pk)

    credential.refresh_from_db()
    assert credential.imap_uidvalidity is not None
    assert credential.imap_last_uid == 1
    assert credential.imap_last_polled_at is not None
    assert credential.imap_last_error == ""


def test_it_matches_references_and_fires_replied_once(imap_mailbox):
    enrollment = sent_enrollment(steps_sent=2)
    credential = with_imap(enrollment, imap_mailbox)
    step1, step2 = enrollment.messages.order_by("step")
    for _ in range(2):  # two replies in the thread
        imap_mailbox.append(
            reply(
                sender=enrollment.contact.email,
                to=credential.from_email,
                in_reply_to="something-else@client.example",
                references=[step1.message_id, step2.message_id.upper()],
            )
        )
    result = poll(credential)
    assert [o.kind for o in result.outcomes] == ["replied", "kept"]
    assert len(events("enrollment.replied")) == 1
    # Nothing new: the next poll reads no message again.
    assert poll(credential).outcomes == []


def test_it_falls_back_to_the_sender_address_authenticated_by_dmarc(thread):
    enrollment, credential, mailbox = thread
    SmtpCredential.objects.filter(pk=credential.pk).update(imap_authserv_id="mx.google.com")
    domain = enrollment.contact.email.split("@")[1]
    mailbox.append(
        delivered(
            reply(sender=enrollment.contact.email.upper(), to=credential.from_email, subject="Hi"),
            authentication_results=gmail_results(domain.upper()),
        )
    )
    assert [o.kind for o in poll(credential).outcomes] == ["replied"]
    enrollment.refresh_from_db()
    assert enrollment.status == Enrollment.Status.REPLIED


def test_the_fallback_ignores_mail_written_before_the_first_send(thread):
    enrollment, credential, mailbox = thread
    mailbox.append(
        reply(
            sender=enrollment.contact.email,
            to=credential.from_email,
            subject="An old conversation",
            date=timezone.now() - timedelta(days=3),
        )
    )
    assert [o.kind for o in poll(credential).outcomes] == ["unmatched"]


@pytest.mark.parametrize(
    "headers",
    [
        {"Auto-Submitted": "auto-replied"},
        {"Auto-Submitted": "auto-generated"},
        {"X-Autoreply": "yes"},
        {"X-Autorespond": "Out of office"},
        {"Precedence": "auto_reply"},
        {"Precedence": "bulk"},
        {"Precedence": "junk"},
        {"Precedence": "list"},
        {"Subject": "Out of Office: Re: Hello"},
        {"Subject": "Automatic reply: Hello"},
        {"Subject": "Abwesenheitsnotiz: Hello"},
    ],
)
def test_auto_replies_are_not_replies(thread, headers):
    enrollment, credential, mailbox = thread
    subject = headers.pop("Subject", "Re: Hello")
    mailbox.append(
        reply(
            sender=enrollment.contact.email,
            to=credential.from_email,
            subject=subject,
            in_reply_to=first_message(enrollment).message_id,
            headers=headers,
        )
    )
    assert [o.kind for o in poll(credential).outcomes] == ["auto_reply"]
    enrollment.refresh_from_db()
    assert enrollment.status == Enrollment.Status.SENT
    assert enrollment.replied_at is None
    assert events() == []


def test_auto_submitted_no_is_a_reply(thread):
    enrollment, credential, mailbox = thread
    mailbox.append(
        reply(
            sender=enrollment.contact.email,
            to=credential.from_email,
            in_reply_to=first_message(enrollment).message_id,
            headers={"Auto-Submitted": "no"},
        )
    )
    assert [o.kind for o in poll(credential).outcomes] == ["replied"]


def test_without_stop_on_reply_the_sequence_continues(imap_mailbox):
    enrollment = sent_enrollment(stop_on_reply=False)
    credential = with_imap(enrollment, imap_mailbox)
    next_send_at = enrollment.next_send_at
    imap_mailbox.append(
        reply(
            sender=enrollment.contact.email,
            to=credential.from_email,
            in_reply_to=first_message(enrollment).message_id,
        )
    )
    assert [o.kind for o in poll(credential).outcomes] == ["replied"]
    enrollment.refresh_from_db()
    assert enrollment.replied_at is not None
    assert enrollment.status == Enrollment.Status.SENT
    assert enrollment.next_send_at == next_send_at
    [event] = events("enrollment.replied")
    assert event.data["status"] == "sent"
    assert event.data["replied_at"] is not None


@pytest.mark.parametrize("attach", ["headers", "message"])
def test_a_permanent_delivery_report_is_a_bounce(thread, attach):
    enrollment, credential, mailbox = thread
    mailbox.append(
        delivery_report(
            to=credential.from_email,
            original_message_id=first_message(enrollment).message_id,
            recipient=enrollment.contact.email,
            attach=attach,
        )
    )
    assert [o.kind for o in poll(credential).outcomes] == ["bounced"]
    enrollment.refresh_from_db()
    assert enrollment.status == Enrollment.Status.BOUNCED
    assert enrollment.bounce_reason == (
        f"5.1.1 550 5.1.1 <{enrollment.contact.email}>: Recipient address rejected: User unknown"
    )
    enrollment.contact.refresh_from_db()
    assert enrollment.contact.bounced_at is not None
    credential.refresh_from_db()
    assert credential.bounced_count == 1
    [event] = events("enrollment.bounced")
    assert event.data["bounce_reason"] == enrollment.bounce_reason
    assert events("enrollment.replied") == []


def test_a_temporary_delivery_report_is_not_a_bounce(thread):
    enrollment, credential, mailbox = thread
    mailbox.append(
        delivery_report(
            to=credential.from_email,
            original_message_id=first_message(enrollment).message_id,
            recipient=enrollment.contact.email,
            status="4.4.1",
            diagnostic="smtp; 451 4.4.1 try again later",
        )
    )
    assert [o.kind for o in poll(credential).outcomes] == ["ignored"]
    enrollment.refresh_from_db()
    assert enrollment.status == Enrollment.Status.SENT
    assert events() == []


def test_strangers_and_our_own_copies_are_not_replies(thread):
    enrollment, credential, mailbox = thread
    sent = first_message(enrollment)
    mailbox.append(reply(sender="stranger@else.example", to=credential.from_email, subject="Hi"))
    own = reply(
        sender=credential.from_email, to=enrollment.contact.email, in_reply_to=sent.message_id
    )
    mailbox.append(own)
    assert [o.kind for o in poll(credential).outcomes] == ["unmatched", "ignored"]
    assert events() == []


def test_it_works_in_bounded_batches_and_resumes(thread, settings):
    settings.IMAP_FETCH_BATCH_SIZE = 2
    settings.IMAP_MAX_MESSAGES_PER_POLL = 3
    enrollment, credential, mailbox = thread
    others = [sent_enrollment(campaign=enrollment.campaign) for _ in range(4)]
    for e in [enrollment, *others]:
        mailbox.append(
            reply(
                sender=e.contact.email,
                to=credential.from_email,
                in_reply_to=first_message(e).message_id,
            )
        )
    first = poll(credential)
    assert len(first.outcomes) == 3 and first.more
    credential.refresh_from_db()
    assert credential.imap_last_uid == 3
    second = poll(credential)
    assert [o.uid for o in second.outcomes] == [4, 5] and not second.more
    assert len(events("enrollment.replied")) == 5


def test_a_new_uidvalidity_starts_over(thread):
    enrollment, credential, mailbox = thread
    mailbox.append(reply(sender="stranger@else.example", to=credential.from_email))
    poll(credential)
    credential.refresh_from_db()
    validity = credential.imap_uidvalidity
    # What the credential remembers belongs to another UIDVALIDITY (the mailbox was
    # rebuilt): UID 50 of that one says nothing about the UIDs of this one.
    SmtpCredential.objects.filter(pk=credential.pk).update(
        imap_uidvalidity=validity - 1, imap_last_uid=50
    )
    mailbox.append(
        reply(
            sender=enrollment.contact.email,
            to=credential.from_email,
            in_reply_to=first_message(enrollment).message_id,
        )
    )
    result = poll(credential)
    assert [o.kind for o in result.outcomes] == ["unmatched", "replied"]
    credential.refresh_from_db()
    assert credential.imap_uidvalidity == validity
    assert credential.imap_last_uid == 2


def test_the_first_poll_of_a_mailbox_that_sent_nothing_starts_at_the_newest(imap_mailbox):
    enrollment = sent_enrollment()
    credential = with_imap(enrollment, imap_mailbox)
    enrollment.messages.all().delete()
    imap_mailbox.append(reply(sender=enrollment.contact.email, to=credential.from_email))
    assert poll(credential).outcomes == []
    credential.refresh_from_db()
    assert credential.imap_last_uid == 1


def test_an_unreachable_mailbox_is_recorded_and_the_others_are_still_polled(thread, imap_mailbox):
    enrollment, credential, mailbox = thread
    broken = sent_enrollment()
    with_imap(broken, mailbox, imap_port=free_port())  # nothing listens there
    wrong_password = sent_enrollment()
    with_imap(wrong_password, mailbox, imap_password="wrong")
    mailbox.append(
        reply(
            sender=enrollment.contact.email,
            to=credential.from_email,
            in_reply_to=first_message(enrollment).message_id,
        )
    )

    assert intake_poll_mailboxes() == 3  # beat: one task per mailbox (eager here)

    enrollment.refresh_from_db()
    assert enrollment.status == Enrollment.Status.REPLIED
    for failed in (broken, wrong_password):
        failed.credential.refresh_from_db()
        assert failed.credential.imap_last_error
        assert failed.credential.imap_last_error_at is not None
        assert failed.credential.imap_last_uid is None
    wrong_password.credential.refresh_from_db()
    assert "AUTHENTICATIONFAILED" in wrong_password.credential.imap_last_error or (
        "failed" in wrong_password.credential.imap_last_error.lower()
    )

    # Fixed: the next round reads them and clears the errors.
    with_imap(broken, mailbox)
    with_imap(wrong_password, mailbox)
    intake_poll_mailboxes()
    for fixed in (broken, wrong_password):
        fixed.credential.refresh_from_db()
        assert fixed.credential.imap_last_error == ""
        assert fixed.credential.imap_last_uid == 1


@pytest.mark.parametrize("security", ["ssl", "starttls"])
def test_it_polls_over_tls(thread, security, monkeypatch):
    enrollment, credential, mailbox = thread
    port = mailbox.ssl_port if security == "ssl" else mailbox.port
    SmtpCredential.objects.filter(pk=credential.pk).update(imap_security=security, imap_port=port)
    mailbox.append(
        reply(
            sender=enrollment.contact.email,
            to=credential.from_email,
            in_reply_to=first_message(enrollment).message_id,
        )
    )
    # The operator's trust store: here, the test server's self-signed certificate.
    monkeypatch.setenv("SSL_CERT_FILE", mailbox.ca_file)
    assert [o.kind for o in poll(credential).outcomes] == ["replied"]


@pytest.mark.parametrize("security", ["ssl", "starttls"])
def test_an_untrusted_certificate_is_recorded_and_nothing_is_read(thread, security):
    enrollment, credential, mailbox = thread
    port = mailbox.ssl_port if security == "ssl" else mailbox.port
    SmtpCredential.objects.filter(pk=credential.pk).update(imap_security=security, imap_port=port)
    mailbox.append(reply(sender=enrollment.contact.email, to=credential.from_email))
    credential.refresh_from_db()
    result = mailbox_poll(credential=credential)
    assert "CERTIFICATE_VERIFY_FAILED" in result.error
    credential.refresh_from_db()
    assert credential.imap_last_error == result.error
    assert credential.imap_last_uid is None


def test_disabled_credentials_and_credentials_without_imap_are_not_polled(thread):
    enrollment, credential, mailbox = thread
    SmtpCredential.objects.filter(pk=credential.pk).update(disabled_at=timezone.now())
    sent_enrollment()  # no IMAP settings
    assert intake_poll_mailboxes() == 0


def test_the_command_polls_one_mailbox_and_prints_the_matches(thread):
    enrollment, credential, mailbox = thread
    mailbox.append(
        reply(
            sender=enrollment.contact.email,
            to=credential.from_email,
            in_reply_to=first_message(enrollment).message_id,
        )
    )
    mailbox.append(reply(sender="stranger@else.example", to=credential.from_email))
    out = StringIO()
    call_command("mailbox_poll", str(credential.pk), stdout=out)
    text = out.getvalue()
    assert f"uid 1: replied enrollment {enrollment.pk}" in text
    assert "uid 2: unmatched (from stranger@else.example)" in text
    assert (
        "2 new message(s): 1 replied, 0 kept, 0 bounced, 0 complained, 0 unsubscribed, "
        "0 auto_reply, 0 unverified, 1 unmatched, 0 ignored, 0 unreadable." in text
    )


def test_the_command_fails_clearly(thread):
    enrollment, credential, mailbox = thread
    with pytest.raises(CommandError, match="No SMTP credential"):
        call_command("mailbox_poll", "nope")
    plain = sent_enrollment()
    with pytest.raises(CommandError, match="no IMAP settings"):
        call_command("mailbox_poll", str(plain.credential_id))
    SmtpCredential.objects.filter(pk=credential.pk).update(imap_port=free_port())
    with pytest.raises(CommandError, match="unreachable"):
        call_command("mailbox_poll", str(credential.pk))
