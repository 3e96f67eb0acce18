"""The complaint guard and ramp-up (docs/deliverability.md): complaints come in through
the relay provider's signed webhook, as in production; the mailbox's state is read
through the API, and the scheduler's claims show what it may send."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from outreach.campaigns.sending_status import sending_status
from outreach.models.mailboxes import SmtpCredential
from outreach.models.reputation import MailboxComplaint
from outreach.models.sending import Message
from tests.intake.factories import message_id_new, sent_enrollment
from tests.intake.relay_signing import MAILGUN_KEY, mailgun_body, mailgun_complained
from tests.outreach.helpers import assert_fields
from tests.outreach.test_sending import NOW, _campaign, _enroll, _events, _run
from tests.webhooks.factories import WebhookFactory

pytestmark = pytest.mark.django_db


def _relay_mailbox(enrollment) -> SmtpCredential:
    credential = SmtpCredential.objects.get(pk=enrollment.credential_id)
    credential.relay_provider = "mailgun"
    credential.relay_signing_key = MAILGUN_KEY
    credential.save()
    return credential


def _sends(enrollment, count: int, *, days_ago: float = 1) -> None:
    """`count` more messages of the enrollment's mailbox, `days_ago` days back."""
    at = timezone.now() - timedelta(days=days_ago)
    Message.objects.bulk_create(
        Message(
            account_id=enrollment.campaign.account_id,
            enrollment=enrollment,
            credential_id=enrollment.credential_id,
            step=1,
            message_id=message_id_new(),
            to_email=enrollment.contact.email,
            sent_at=at,
        )
        for _ in range(count)
    )


def _complain(account, credential, count: int) -> None:
    """`count` contacts of the mailbox complain, each about a message sent to them."""
    for _ in range(count):
        enrollment = sent_enrollment(campaign=credential.campaigns.first())
        message = Message.objects.filter(enrollment=enrollment).get()
        body = mailgun_body(mailgun_complained(message.message_id))
        response = Client().post(
            f"/inbound/relay/{credential.pk}", data=body, content_type="application/json"
        )
        assert response.json()["unsubscribed"] == 1


@pytest.fixture
def mailbox(account):
    enrollment = sent_enrollment(account=account)
    credential = _relay_mailbox(enrollment)
    WebhookFactory(account=account, event_filters=["credential.throttled", "credential.disabled"])
    return enrollment, credential


def test_a_complaint_rate_above_the_line_pauses_the_mailbox(mailbox, api_client, account):
    enrollment, credential = mailbox
    _sends(enrollment, 597)  # 598 sends, and the complaints' own two: 600
    _complain(account, credential, 1)  # 1 / 599: 0.17%
    credential.refresh_from_db()
    assert credential.paused_at is None

    _complain(account, credential, 1)  # 2 / 600: 0.33%, above 0.3%

    shown = api_client.get(f"/smtp_credentials/{credential.pk}").json()
    assert shown["paused_reason"] == "complaint_rate"
    assert shown["paused_at"] is not None
    assert shown["disabled_at"] is None  # paused, not disabled
    assert _events("credential.disabled") == []
    [event] = _events("credential.throttled")
    assert event == {
        "credential_id": str(credential.pk),
        "from_email": credential.from_email,
        "provider": None,
        "reason": "complaint_rate",
        "until": None,
        "detail": "2 spam complaints over 600 sends in the last 30 days (0.33%, above 0.3%).",
    }
    credential.refresh_from_db()
    status = sending_status(campaign=enrollment.campaign, now=timezone.now())
    [box] = [b for b in status["mailboxes"] if b["credential_id"] == credential.pk]
    assert box["can_send_now"] is False
    assert [r["code"] for r in box["reasons"]][0] == "complaint_rate"

    # A third complaint pauses nothing twice and fires nothing more.
    _complain(account, credential, 1)
    assert len(_events("credential.throttled")) == 1

    # PATCH {paused_at: null} resumes it; any other value is refused.
    url = f"/smtp_credentials/{credential.pk}"
    assert_fields(api_client.patch(url, {"paused_at": "2026-01-01T00:00:00Z"}), "paused_at")
    response = api_client.patch(url, {"paused_at": None}, format="json")
    assert response.status_code == 200, response.content
    assert (response.json()["paused_at"], response.json()["paused_reason"]) == (None, None)


def test_under_a_hundred_sends_no_rate_is_read(mailbox, account):
    enrollment, credential = mailbox
    _complain(account, credential, 5)  # 5 of 6 sends: a rate over too few sends
    credential.refresh_from_db()
    assert credential.paused_at is None
    assert MailboxComplaint.objects.filter(credential=credential).count() == 5


def test_older_sends_and_complaints_do_not_count(mailbox, account):
    enrollment, credential = mailbox
    _sends(enrollment, 500, days_ago=31)  # outside the 30 days
    _sends(enrollment, 99)
    MailboxComplaint.objects.bulk_create(
        MailboxComplaint(credential=credential, at=timezone.now() - timedelta(days=31))
        for _ in range(50)
    )
    _complain(account, credential, 1)  # 1 complaint over 101 sends: 0.99%
    credential.refresh_from_db()
    assert credential.paused_reason == "complaint_rate"


def test_a_paused_mailbox_gets_no_claim_and_another_takes_new_threads(smtp_sink):
    from tests.outreach.test_sending import _more_mailboxes

    sink = smtp_sink()
    campaign = _campaign(sink)
    paused = campaign.credentials.get()
    [other] = _more_mailboxes(campaign, sink, 1)
    SmtpCredential.objects.filter(pk=paused.pk).update(
        paused_at=NOW, paused_reason="complaint_rate"
    )
    thread = _enroll(campaign, email="thread@example.org")
    type(thread).objects.filter(pk=thread.pk).update(credential=paused)
    new = _enroll(campaign, email="new@example.org")

    _run()

    assert [m.rcpt_tos for m in sink.messages] == [["new@example.org"]]
    assert sink.messages[0].mail_from == other.from_email
    thread.refresh_from_db()
    assert (thread.status, thread.send_attempts) == ("scheduled", 0)
    new.refresh_from_db()
    assert new.credential_id == other.pk
    campaign.refresh_from_db()
    assert campaign.status == "active"  # a paused mailbox leaves its campaign active


# --- ramp-up ----------------------------------------------------------------------------------


def test_ramp_up_is_validated_naming_the_field(api_client, account):
    from tests.outreach.factories import CredentialFactory

    credential = CredentialFactory(account=account)
    url = f"/smtp_credentials/{credential.pk}"
    for bad, named in (
        ({"start_per_day": 0, "increase_per_day": 5}, "ramp_up.start_per_day"),
        ({"start_per_day": 5, "increase_per_day": -1}, "ramp_up.increase_per_day"),
        ({"start_per_day": 5}, "ramp_up.increase_per_day"),
        ({"start_per_day": 5, "increase_per_day": 5, "extra": 1}, "ramp_up.extra"),
        ({"start_per_day": "many", "increase_per_day": 5}, "ramp_up.start_per_day"),
        ("fast", "ramp_up.non_field_errors"),
    ):
        assert_fields(api_client.patch(url, {"ramp_up": bad}, format="json"), named)
    response = api_client.patch(
        url, {"ramp_up": {"start_per_day": 5, "increase_per_day": 3}}, format="json"
    )
    assert response.status_code == 200, response.content
    assert response.json()["ramp_up"] == {"start_per_day": 5, "increase_per_day": 3}
    response = api_client.patch(url, {"ramp_up": None}, format="json")
    assert response.json()["ramp_up"] is None


def test_the_ramp_holds_sends_above_its_day_and_grows_each_utc_day(smtp_sink):
    sink = smtp_sink()
    campaign = _campaign(sink)
    credential = campaign.credentials.get()
    SmtpCredential.objects.filter(pk=credential.pk).update(
        daily_limit=50, ramp_up={"start_per_day": 2, "increase_per_day": 3}
    )
    enrollments = [_enroll(campaign, email=f"r{i}@example.org") for i in range(7)]

    _run()

    assert len(sink.messages) == 2  # day 0: start_per_day
    credential.refresh_from_db()
    assert credential.ramp_started_on == NOW.date()
    status = sending_status(campaign=campaign, now=NOW + timedelta(minutes=1))
    [box] = status["mailboxes"]
    assert box["daily_limit"] == 2
    assert box["reasons"][0]["code"] == "ramping_up"
    waiting = [e for e in enrollments if (e.refresh_from_db() or e.status == "scheduled")]
    assert len(waiting) == 5
    assert {e.next_send_at for e in waiting} == {NOW.replace(hour=0) + timedelta(days=1)}

    _run(NOW + timedelta(days=1))  # day 1: 2 + 3
    assert len(sink.messages) == 7
    credential.refresh_from_db()
    assert credential.ramp_started_on == NOW.date()  # counted from its first send


def test_a_new_ramp_counts_its_days_from_its_own_first_send(api_client, account):
    from tests.outreach.factories import CredentialFactory

    credential = CredentialFactory(account=account)
    SmtpCredential.objects.filter(pk=credential.pk).update(
        ramp_up={"start_per_day": 2, "increase_per_day": 3}, ramp_started_on=NOW.date()
    )
    api_client.patch(
        f"/smtp_credentials/{credential.pk}",
        {"ramp_up": {"start_per_day": 10, "increase_per_day": 10}},
        format="json",
    )
    credential.refresh_from_db()
    assert credential.ramp_started_on is None


def test_a_complaint_about_a_finished_sequence_counts_once(mailbox):
    # Most complaints come after the last step: the contact has no active enrollment
    # left to move, and is still unsubscribed and counted, once.
    enrollment, credential = mailbox
    enrollment.status = "completed"
    enrollment.save(update_fields=["status"])
    message = Message.objects.filter(enrollment=enrollment).get()
    body = mailgun_body(mailgun_complained(message.message_id))
    again = mailgun_body(mailgun_complained(message.message_id))

    for sent in (body, again):
        response = Client().post(
            f"/inbound/relay/{credential.pk}", data=sent, content_type="application/json"
        )
        assert response.status_code == 200

    enrollment.contact.refresh_from_db()
    assert enrollment.contact.unsubscribed_at is not None
    assert MailboxComplaint.objects.filter(credential=credential).count() == 1
