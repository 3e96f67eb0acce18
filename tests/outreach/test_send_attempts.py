"""One record per SMTP attempt (docs/sending.md, "Attempts"): every outcome of a send
leaves its attempt, which the enrollment's thread (API) and the admin show, and the
enrollment's or the mailbox's last_error is the latest attempt's text."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Enrollment, Message, SendClaim
from tests.outreach.test_sending import NOW, _campaign, _enroll, _point_at, _run
from tests.support.ports import free_port

pytestmark = pytest.mark.django_db


@pytest.fixture
def sink(smtp_sink, db):
    return smtp_sink()


def _thread(client, enrollment) -> list[dict]:
    url = f"/campaigns/{enrollment.campaign_id}/enrollments/{enrollment.pk}/thread"
    response = client.get(url)
    assert response.status_code == 200, response.content
    return response.json()


def _owned(campaign, account) -> None:
    type(campaign).objects.filter(pk=campaign.pk).update(account=account)
    SmtpCredential.objects.filter(campaigns=campaign).update(account=account)
    campaign.refresh_from_db()


def test_a_retried_step_shows_each_attempt_in_its_thread(sink, api_client, account):
    campaign = _campaign(sink, steps=2)
    _owned(campaign, account)
    credential = campaign.credentials.get()
    enrollment = _enroll(campaign, email="busy@example.org")
    sink.reject_rcpt("busy@example.org", "451 4.7.1 Try again later", times=1)

    _run()
    enrollment.refresh_from_db()
    [deferred] = SendClaim.objects.filter(enrollment=enrollment)
    assert (deferred.outcome, deferred.reply_code) == ("deferred", 451)
    # The enrollment's last_error is its latest attempt's text.
    assert enrollment.last_error == deferred.reply_text == "451 4.7.1 Try again later"

    _run(enrollment.next_send_at)
    enrollment.refresh_from_db()
    assert (enrollment.status, enrollment.last_error) == ("sent", "")

    entries = _thread(api_client, enrollment)
    assert [e["type"] for e in entries] == ["attempt", "step"]
    failed = entries[0]["attempt"]
    assert failed == {
        "id": deferred.pk,
        "step": 1,
        "credential_id": str(credential.pk),
        "outcome": "deferred",
        "reply_code": 451,
        "reply_text": "451 4.7.1 Try again later",
        "outcome_unknown": False,
        "started_at": "2026-03-02T10:00:00.000000Z",
        "finished_at": "2026-03-02T10:00:00.000000Z",
        "duration_ms": failed["duration_ms"],
    }
    assert failed["duration_ms"] >= 0
    assert entries[0]["step"] is None and entries[1]["attempt"] is None
    sent = entries[1]["step"]["attempt"]
    assert (sent["outcome"], sent["reply_code"], sent["outcome_unknown"]) == ("sent", 250, False)
    assert sent["reply_text"].startswith("250 ")


def test_a_bounce_is_an_attempt_with_the_servers_reply(sink, api_client, account):
    campaign = _campaign(sink)
    _owned(campaign, account)
    enrollment = _enroll(campaign, email="gone@example.org")
    sink.reject_rcpt("gone@example.org")

    _run()

    enrollment.refresh_from_db()
    assert enrollment.status == "bounced"
    [entry] = _thread(api_client, enrollment)
    assert entry["type"] == "attempt"
    assert (entry["attempt"]["outcome"], entry["attempt"]["reply_code"]) == ("bounced", 550)
    assert entry["attempt"]["reply_text"] == enrollment.bounce_reason


def test_a_mailbox_failure_is_the_attempt_of_the_claim_it_came_on(smtp_sink):
    sink = smtp_sink(username="mailbox@example.com", password="right")
    campaign = _campaign(sink)
    credential = _point_at(
        campaign.credentials.get(), sink, smtp_username="mailbox@example.com", smtp_password="no"
    )
    first = _enroll(campaign)
    second = _enroll(campaign, at=NOW - timedelta(seconds=1))

    [result] = _run()

    assert result.mailbox_error.startswith("authentication failed: 535")
    [attempt] = SendClaim.objects.all()  # the other claim was given back: no attempt
    assert attempt.enrollment_id == second.pk  # the older one came first
    assert (attempt.outcome, attempt.reply_code) == ("mailbox_failed", 535)
    credential.refresh_from_db()
    assert credential.last_error == attempt.reply_text == result.mailbox_error
    for enrollment in (first, second):
        enrollment.refresh_from_db()
        assert (enrollment.send_attempts, enrollment.last_error) == (0, "")
        assert enrollment.next_send_at == NOW + timedelta(seconds=900)
    credential.refresh_from_db()
    assert credential.daily_sent_count == 0  # both reservations given back


def test_a_refused_connection_is_an_attempt_of_every_claim_it_held_up(sink):
    campaign = _campaign(sink)
    credential = campaign.credentials.get()
    enrollments = [_enroll(campaign) for _ in range(2)]
    SmtpCredential.objects.filter(pk=credential.pk).update(smtp_port=free_port())  # nobody

    [result] = _run()

    assert result.retried == 2
    attempts = SendClaim.objects.order_by("pk")
    assert [(a.outcome, a.reply_code) for a in attempts] == [("deferred", None)] * 2
    credential.refresh_from_db()
    assert credential.last_error.startswith("cannot connect to")
    for enrollment, attempt in zip(enrollments, attempts, strict=True):
        enrollment.refresh_from_db()
        assert enrollment.last_error == attempt.reply_text == credential.last_error
        assert enrollment.send_attempts == 1


def test_the_thread_reads_attempts_in_one_query_whatever_their_number(sink, api_client, account):
    campaign = _campaign(sink)
    _owned(campaign, account)
    enrollment = _enroll(campaign, email="busy@example.org")
    url = f"/campaigns/{enrollment.campaign_id}/enrollments/{enrollment.pk}/thread"
    counts = []
    for round_ in range(3):
        sink.reject_rcpt("busy@example.org", "451 4.7.1 Try again later", times=1)
        enrollment.refresh_from_db()
        _run(enrollment.next_send_at)
        with CaptureQueriesContext(connection) as queries:
            assert len(api_client.get(url).json()) == round_ + 1
        counts.append(len(queries))
    assert counts[0] == counts[-1]


def test_the_admin_shows_attempts_under_the_enrollment_and_the_mailbox(sink, admin_client):
    campaign = _campaign(sink)
    credential = campaign.credentials.get()
    enrollment = _enroll(campaign, email="gone@example.org")
    sink.reject_rcpt("gone@example.org")
    _run()

    page = admin_client.get(reverse("admin:outreach_enrollment_change", args=[enrollment.pk]))
    assert page.status_code == 200
    assert b"SMTP attempts" in page.content
    assert b"550 5.1.1 No such user here" in page.content
    page = admin_client.get(reverse("admin:outreach_smtpcredential_change", args=[credential.pk]))
    assert page.status_code == 200
    assert b"Latest 50 SMTP attempts" in page.content
    assert str(enrollment.pk).encode() in page.content
    assert b"550 5.1.1 No such user here" in page.content


def test_attempts_go_with_their_enrollment_and_outlive_their_mailbox(sink):
    campaign = _campaign(sink)
    credential = campaign.credentials.get()
    kept, deleted = _enroll(campaign), _enroll(campaign)
    _run()
    assert SendClaim.objects.count() == 2

    credential.delete()
    attempt = SendClaim.objects.get(enrollment=kept)
    assert (attempt.credential_id, attempt.outcome) == (None, "sent")
    assert Message.objects.get(enrollment=kept).credential_id is None

    Enrollment.objects.filter(pk=deleted.pk).delete()
    assert list(SendClaim.objects.values_list("enrollment_id", flat=True)) == [kept.pk]
