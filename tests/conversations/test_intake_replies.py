"""The intake keeps every message it matches to an enrollment, against a real Dovecot:
replies, further replies, out-of-office notices, auto-replies, unsubscribe requests,
broken and oversized messages; and what each label does to the sequence."""

from datetime import datetime, time, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone

from outreach.models.contacts import Suppression
from outreach.models.conversations import Reply, ReplyResponse
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Enrollment
from tests.conversations.reply_rows import response_to
from tests.intake.conftest import requires_dovecot
from tests.intake.factories import first_message, sent_enrollment
from tests.intake.helpers import events
from tests.intake.mail import reply
from tests.intake.test_mailbox import poll, with_imap

pytestmark = [pytest.mark.django_db, requires_dovecot]

MAIL = Path(__file__).parent / "mail"


@pytest.fixture
def thread(imap_mailbox):
    enrollment = sent_enrollment()
    credential = with_imap(enrollment, imap_mailbox)
    return enrollment, credential, imap_mailbox


def answer(enrollment, credential, **kwargs) -> bytes:
    kwargs.setdefault("in_reply_to", first_message(enrollment).message_id)
    return reply(sender=enrollment.contact.email, to=credential.from_email, **kwargs)


def test_a_reply_is_kept_with_what_the_contact_wrote(thread):
    enrollment, credential, mailbox = thread
    sent = first_message(enrollment)
    mailbox.append(
        answer(
            enrollment,
            credential,
            body="Yes, Tuesday works.\n\nOn Mon, 3 Mar 2025 at 10:00, Me <me@x.example> wrote:\n> Hello",
        )
    )
    assert [o.kind for o in poll(credential).outcomes] == ["replied"]
    [kept] = Reply.objects.all()
    assert kept.enrollment_id == enrollment.pk
    assert kept.account_id == enrollment.campaign.account_id
    assert kept.campaign_id == enrollment.campaign_id
    assert kept.contact_id == enrollment.contact_id
    assert kept.credential_id == credential.pk
    assert kept.from_email == enrollment.contact.email.lower()
    assert kept.from_name == "Contact"
    assert kept.to == [credential.from_email]
    assert kept.subject == "Re: Hello"
    assert kept.in_reply_to == sent.message_id
    assert kept.message_id.endswith("@client.example")
    assert "Yes, Tuesday works." in kept.text and "> Hello" in kept.text
    assert kept.new_text == "Yes, Tuesday works."
    assert kept.label == "" and kept.label_source == ""
    assert kept.read is False and kept.truncated is False
    [event] = events("enrollment.replied")
    assert event.data["enrollment_id"] == str(enrollment.pk)


def test_further_replies_are_kept_and_a_message_seen_twice_is_kept_once(thread):
    enrollment, credential, mailbox = thread
    mailbox.append(answer(enrollment, credential, body="First"))
    mailbox.append(answer(enrollment, credential, body="Second"))
    assert [o.kind for o in poll(credential).outcomes] == ["replied", "kept"]
    assert sorted(Reply.objects.values_list("new_text", flat=True)) == ["First", "Second"]
    assert len(events("enrollment.replied")) == 1

    # A poll that died before it remembered the UIDs reads them again.
    SmtpCredential.objects.filter(pk=credential.pk).update(imap_last_uid=0)
    assert [o.kind for o in poll(credential).outcomes] == ["ignored", "ignored"]
    assert Reply.objects.count() == 2
    assert len(events("enrollment.replied")) == 1


def test_an_out_of_office_notice_holds_the_next_step_until_the_day_after_its_return(thread):
    enrollment, credential, mailbox = thread
    campaign = enrollment.campaign
    campaign.timezone = "Europe/Berlin"
    campaign.save(update_fields=["timezone"])
    back = timezone.now().date() + timedelta(days=10)
    mailbox.append(
        answer(
            enrollment,
            credential,
            subject="Out of Office: Re: Hello",
            headers={"Auto-Submitted": "auto-replied"},
            body=f"I am out of the office until {back.strftime('%B')} {back.day}, {back.year}.",
        )
    )
    assert [o.kind for o in poll(credential).outcomes] == ["auto_reply"]
    [kept] = Reply.objects.all()
    assert (kept.label, kept.label_source, kept.returns_on) == ("out_of_office", "auto", back)
    enrollment.refresh_from_db()
    assert enrollment.status == Enrollment.Status.SENT
    assert enrollment.replied_at is None
    assert enrollment.next_send_at == datetime.combine(
        back + timedelta(days=1), time(0, 0), tzinfo=ZoneInfo("Europe/Berlin")
    )
    assert events() == []


def test_an_out_of_office_notice_without_a_date_changes_nothing(thread):
    enrollment, credential, mailbox = thread
    next_send_at = enrollment.next_send_at
    mailbox.append(
        answer(
            enrollment,
            credential,
            subject="Abwesenheitsnotiz: Re: Hello",
            body="Ich bin derzeit nicht im Büro.",
        )
    )
    assert [o.kind for o in poll(credential).outcomes] == ["auto_reply"]
    kept = Reply.objects.get()
    assert kept.label == "out_of_office" and kept.returns_on is None
    enrollment.refresh_from_db()
    assert enrollment.next_send_at == next_send_at and enrollment.status == "sent"


def test_an_auto_reply_is_kept_and_is_not_a_reply(thread):
    enrollment, credential, mailbox = thread
    mailbox.append(
        answer(
            enrollment,
            credential,
            subject="Automatic reply: Re: Hello",
            headers={"Auto-Submitted": "auto-replied"},
            body="Thank you for your message. We will get back to you.",
        )
    )
    assert [o.kind for o in poll(credential).outcomes] == ["auto_reply"]
    assert Reply.objects.get().label == "auto_reply"
    enrollment.refresh_from_db()
    assert enrollment.status == "sent" and enrollment.replied_at is None
    assert events() == []


def test_an_unsubscribe_request_suppresses_the_contact_and_is_still_a_reply(imap_mailbox):
    enrollment = sent_enrollment()
    credential = with_imap(enrollment, imap_mailbox)
    contact = enrollment.contact
    elsewhere = sent_enrollment(account=enrollment.campaign.account, contact=contact)
    imap_mailbox.append(
        answer(enrollment, credential, body="Please remove me from your list.\n\n> Hello Ada")
    )
    assert [o.kind for o in poll(credential).outcomes] == ["replied"]
    assert Reply.objects.get().label == "unsubscribe_request"
    contact.refresh_from_db()
    assert contact.unsubscribed_at is not None
    assert Suppression.objects.filter(
        account=contact.account, email_lower=contact.email_lower, reason="unsubscribed"
    ).exists()
    enrollment.refresh_from_db()
    elsewhere.refresh_from_db()
    assert enrollment.status == elsewhere.status == Enrollment.Status.UNSUBSCRIBED
    assert enrollment.replied_at is not None
    unsubscribed = {e.data["enrollment_id"] for e in events("enrollment.unsubscribed")}
    assert unsubscribed == {str(enrollment.pk), str(elsewhere.pk)}
    [replied] = events("enrollment.replied")
    assert replied.data["enrollment_id"] == str(enrollment.pk)


def test_a_broken_message_is_kept_and_reported_and_the_poll_goes_on(thread):
    enrollment, credential, mailbox = thread
    sent = first_message(enrollment)
    broken = (
        f"From: Contact <{enrollment.contact.email}>\r\n"
        f"To: {credential.from_email}\r\n"
        "Subject: =?utf-8?B?broken?=\r\n"
        f"In-Reply-To: <{sent.message_id}>\r\n"
        "MIME-Version: 1.0\r\n"
        'Content-Type: multipart/alternative; boundary="zzz"\r\n'
        "\r\n"
        "--zzz\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n"
        "Content-Transfer-Encoding: base64\r\n"
        "\r\n"
        "SGVsbG8gd29y!!!bGQ=\r\n"
    ).encode()
    mailbox.append(broken)
    mailbox.append(answer(enrollment, credential, body="After the broken one"))
    result = poll(credential)
    assert [o.kind for o in result.outcomes] == ["replied", "kept"]
    kept = Reply.objects.get(message_id__startswith="imap-")  # no Message-ID: a stand-in
    assert "CloseBoundaryNotFound" in kept.defects  # reported
    assert kept.text == "Hello world"
    assert Reply.objects.exclude(pk=kept.pk).get().new_text == "After the broken one"


def test_an_oversized_message_is_cut_and_marked(thread, settings):
    settings.IMAP_MAX_MESSAGE_BYTES = 4096
    enrollment, credential, mailbox = thread
    mailbox.append(answer(enrollment, credential, body="Long story.\n" + "x" * 70 * 200))
    assert [o.kind for o in poll(credential).outcomes] == ["replied"]
    kept = Reply.objects.get()
    assert kept.truncated is True
    assert kept.size <= 4096
    assert kept.text.startswith("Long story.")
    assert any("cut" in defect for defect in kept.defects)


def test_the_body_cap_cuts_text_and_marks_it(thread, settings):
    settings.REPLY_BODY_MAX_CHARS = 100
    enrollment, credential, mailbox = thread
    mailbox.append(answer(enrollment, credential, body="y" * 500))
    poll(credential)
    kept = Reply.objects.get()
    assert kept.truncated is True and len(kept.text) <= 100


def test_many_replies_are_read_in_groups_within_the_byte_budget(thread, settings):
    settings.IMAP_MAX_MESSAGE_BYTES = 2048
    settings.IMAP_FETCH_MAX_BYTES = 4096  # two whole messages per FETCH
    enrollment, credential, mailbox = thread
    others = [sent_enrollment(campaign=enrollment.campaign) for _ in range(4)]
    for e in [enrollment, *others]:
        mailbox.append(answer(e, credential, body=f"Reply of {e.contact.email}"))
    result = poll(credential)
    assert [o.kind for o in result.outcomes] == ["replied"] * 5
    assert Reply.objects.count() == 5
    for e in [enrollment, *others]:
        assert Reply.objects.get(enrollment=e).new_text == f"Reply of {e.contact.email}"


@pytest.mark.parametrize(
    "name", sorted(p.name for p in MAIL.glob("*.eml")) if MAIL.exists() else []
)
def test_every_real_world_message_is_kept_through_imap(thread, name):
    """Each message of the corpus, threaded to our email and delivered by APPEND, is kept
    with a text (or reported defects); the poll never fails."""
    enrollment, credential, mailbox = thread
    raw = (MAIL / name).read_bytes()
    header = f"In-Reply-To: <{first_message(enrollment).message_id}>\r\n".encode()
    mailbox.append(header + raw)
    [outcome] = poll(credential).outcomes
    assert outcome.kind in ("replied", "auto_reply"), outcome
    kept = Reply.objects.get()
    assert kept.text or kept.html or kept.defects or kept.attachments
    assert "<script" not in kept.html.lower()


def test_deleting_the_contact_deletes_its_replies(api_client, account):
    enrollment = sent_enrollment(account=account)
    Reply.objects.create(
        account=account,
        enrollment=enrollment,
        campaign=enrollment.campaign,
        contact=enrollment.contact,
        message_id="x@client.example",
        received_at=timezone.now(),
        text="private",
    )
    assert api_client.delete(f"/contacts/{enrollment.contact_id}").status_code == 204
    assert Reply.objects.count() == 0


def test_old_bodies_are_purged_and_the_metadata_stays(account, settings):
    from outreach.conversations.beat import replies_purge_task

    settings.REPLY_RETENTION_DAYS = 30
    enrollment = sent_enrollment(account=account)
    now = timezone.now()

    def make(days, message_id):
        return Reply.objects.create(
            account=account,
            enrollment=enrollment,
            campaign=enrollment.campaign,
            contact=enrollment.contact,
            message_id=message_id,
            subject="Re: Hello",
            from_email="ada@example.org",
            received_at=now - timedelta(days=days),
            text="t",
            new_text="n",
            html="<p>h</p>",
            label="interested",
        )

    old, recent = make(31, "old@x"), make(29, "recent@x")
    answered = response_to(old, body_html="<p>Tuesday?</p>")
    ReplyResponse.objects.filter(pk=answered.pk).update(created_at=now - timedelta(days=31))
    kept_answer = response_to(recent)
    assert replies_purge_task() == 1
    answered.refresh_from_db()
    kept_answer.refresh_from_db()
    assert (answered.body_text, answered.body_html, answered.status) == ("", "", "sent")
    assert kept_answer.body_text == "Great, Tuesday?"
    old.refresh_from_db()
    recent.refresh_from_db()
    assert (old.text, old.new_text, old.html) == ("", "", "")
    assert old.body_purged_at is not None
    assert (old.subject, old.from_email, old.label) == (
        "Re: Hello",
        "ada@example.org",
        "interested",
    )
    assert recent.text == "t" and recent.body_purged_at is None
    assert replies_purge_task() == 0  # nothing left to purge
    settings.REPLY_RETENTION_DAYS = 0
    assert replies_purge_task() == 0
    recent.refresh_from_db()
    assert recent.text == "t"
