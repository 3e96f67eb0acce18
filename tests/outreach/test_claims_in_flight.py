"""An enrollment in flight (docs/sending.md, "Scheduling"): its open claim alone keeps
it from other scheduler runs; the enrollment itself is not written by the claim, so
the API shows the time its step was due until the send is recorded, and a claim lost
with its worker leaves it due at once, in its place."""

from datetime import timedelta

import pytest
from django.db import OperationalError

from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import SendClaim
from outreach.sending import scheduler
from outreach.sending.scheduler import schedule_due
from outreach.sending.send import batch_send
from tests.outreach.factories import CredentialFactory
from tests.outreach.test_sending import NOW, _campaign, _enroll, _point_at

pytestmark = pytest.mark.django_db


@pytest.fixture
def sink(smtp_sink, db):
    return smtp_sink()


def _owned(campaign, account) -> None:
    type(campaign).objects.filter(pk=campaign.pk).update(account=account)
    SmtpCredential.objects.filter(campaigns=campaign).update(account=account)
    campaign.refresh_from_db()


def _shown(client, enrollment) -> dict:
    response = client.get(f"/campaigns/{enrollment.campaign_id}/enrollments")
    assert response.status_code == 200, response.content
    [shown] = [e for e in response.json() if e["id"] == str(enrollment.pk)]
    return shown


def test_an_enrollment_in_flight_shows_its_due_time_and_no_other_run_claims_it(
    sink, api_client, account
):
    campaign = _campaign(sink, steps=2)
    _owned(campaign, account)
    # A second mailbox, free: a new thread could go to either.
    campaign.credentials.add(
        _point_at(CredentialFactory(account=account), sink, smtp_username="", smtp_password="")
    )
    enrollment = _enroll(campaign)

    [batch] = schedule_due(now=NOW)

    shown = _shown(api_client, enrollment)
    assert (shown["status"], shown["next_send_at"]) == ("scheduled", "2026-03-02T10:00:00.000000Z")
    # A minute later its mailbox is busy with it and the other one is free: the open
    # claim alone keeps it out of the run.
    assert schedule_due(now=NOW + timedelta(minutes=1)) == []
    assert SendClaim.objects.filter(enrollment=enrollment).count() == 1

    result = batch_send(
        batch_id=batch.batch_id, credential_id=batch.credential_id, clock=lambda: NOW
    )

    assert result.sent == 1 and len(sink.messages) == 1
    shown = _shown(api_client, enrollment)
    assert (shown["status"], shown["current_step"]) == ("sent", 1)
    assert shown["next_send_at"] == "2026-03-03T10:00:00.000000Z"  # step 2, a day later


def test_a_claim_lost_with_its_worker_leaves_the_enrollment_due_at_once(
    sink, api_client, account, settings
):
    settings.SENDING_LEASE_SECONDS = 60
    campaign = _campaign(sink)
    _owned(campaign, account)
    enrollment = _enroll(campaign)
    schedule_due(now=NOW)  # its batch is never sent: the worker died

    assert schedule_due(now=NOW + timedelta(seconds=59)) == []
    [batch] = schedule_due(now=NOW + timedelta(seconds=60))  # the lease lapsed

    # Recovered and claimed again by the same run, still due at the time it was.
    assert batch.size == 1
    claim = SendClaim.objects.get(enrollment=enrollment)
    assert (claim.batch_id, claim.due_at) == (batch.batch_id, NOW)
    assert _shown(api_client, enrollment)["next_send_at"] == "2026-03-02T10:00:00.000000Z"
    batch_send(
        batch_id=batch.batch_id,
        credential_id=batch.credential_id,
        clock=lambda: NOW + timedelta(seconds=60),
    )
    assert [m.rcpt_tos for m in sink.messages] == [[enrollment.contact.email]]
    assert _shown(api_client, enrollment)["status"] == "completed"


def test_a_claim_transaction_that_meets_an_open_claim_rolls_back_whole(sink, monkeypatch):
    """The race guard: a scan reads an enrollment before another run's claim of it
    commits, and locks it after (a lock is no change of the row, so PostgreSQL does not
    look again). Its claim then fails on the index of open claims, and everything the
    transaction wrote is rolled back. Here the other run's claim is made in the
    transaction itself, after its scan: the same state, without the timing."""
    campaign = _campaign(sink)
    credential = campaign.credentials.get()
    first, second = _enroll(campaign), _enroll(campaign)
    real_decide = scheduler._decide

    def decide_after_another_claim(enrollments, **kwargs):
        plan = real_decide(enrollments, **kwargs)
        SendClaim.objects.create(
            enrollment=second,
            batch_id=first.pk,  # any id: another run's batch
            credential=credential,
            step=1,
            claimed_at=NOW,
            lease_until=NOW + timedelta(minutes=15),
        )
        return plan

    monkeypatch.setattr(scheduler, "_decide", decide_after_another_claim)
    assert schedule_due(now=NOW) == []  # the lost race: nothing claimed
    assert not SendClaim.objects.exists()
    credential.refresh_from_db()
    assert credential.daily_sent_count == 0  # its reservations rolled back too

    monkeypatch.setattr(scheduler, "_decide", real_decide)
    [batch] = schedule_due(now=NOW)  # the next run claims both
    assert batch.size == 2


@pytest.mark.parametrize("reply_seen", [False, True])
def test_a_worker_back_after_its_claim_was_recovered_records_nothing_twice(
    sink, settings, reply_seen
):
    """A worker cut off from the network past its claim's lease, in the middle of a
    message: the scheduler's recovery records the send from the claim's start mark.
    When the worker comes back, its own record (the reply it saw, or the one it gave
    up on) finds the claim finished and records nothing: one Message, one use of the
    plan, one `enrollment.sent` (tests/e2e/test_host_cut_off.py runs it for real)."""
    from billing.models import UsageRecord
    from outreach.models.sending import Message
    from outreach.sending.message import Outgoing
    from outreach.sending.record import sent_record
    from tests.outreach.test_sending import _events

    settings.SENDING_LEASE_SECONDS = 60
    campaign = _campaign(sink)
    enrollment = _enroll(campaign)
    schedule_due(now=NOW)
    SendClaim.objects.filter(enrollment=enrollment).update(
        sending_at=NOW, message_id="m1@example.com", subject="Hello", to_email="x@example.org"
    )
    claim = SendClaim.objects.select_related("enrollment__campaign", "credential").get()
    schedule_due(now=NOW + timedelta(seconds=60))  # the lease lapsed: recovered

    assert not sent_record(  # nothing recorded: the worker counts nothing either
        claim=claim,
        enrollment=claim.enrollment,
        campaign=claim.enrollment.campaign,
        credential=claim.credential,
        steps={step.position: step for step in campaign.steps.all()},
        outgoing=Outgoing(
            message_id="m1@example.com",
            subject="Hello",
            data=b"",
            to_email="x@example.org",
        ),
        now=NOW,
        reply_seen=reply_seen,
        reply=(250, "OK") if reply_seen else None,
    )

    [message] = Message.objects.filter(enrollment=enrollment)
    assert message.reply_seen is False  # as the recovery recorded it
    claim.refresh_from_db()
    assert (claim.outcome, claim.outcome_unknown) == ("sent", True)
    usage = UsageRecord.objects.filter(account=campaign.account)
    assert sum(record.sends_count for record in usage) == 1
    assert [e["enrollment_id"] for e in _events("enrollment.sent")] == [str(enrollment.pk)]
    enrollment.refresh_from_db()
    assert enrollment.status == "completed" and "never seen" in enrollment.last_error


def test_a_run_that_fails_after_a_claim_still_queues_what_it_committed(
    sink, settings, monkeypatch, django_capture_on_commit_callbacks
):
    """An unpaced mailbox's batches of a run wait for the run's end to go in one task.
    When a later claim transaction of the run fails (the database went away, a timeout),
    the batches committed before it are queued all the same, not left to lapse with
    their lease."""
    settings.SENDING_BATCH_SIZE = 1
    campaign = _campaign(sink)
    SmtpCredential.objects.filter(campaigns=campaign).update(
        min_interval_seconds=0, max_interval_seconds=0
    )
    for _ in range(3):
        _enroll(campaign)
    real_claim_once = scheduler._claim_once
    calls = []

    def claim_once_then_fail(view, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise OperationalError("server closed the connection unexpectedly")
        return real_claim_once(view, **kwargs)

    monkeypatch.setattr(scheduler, "_claim_once", claim_once_then_fail)
    with django_capture_on_commit_callbacks() as callbacks, pytest.raises(OperationalError):
        schedule_due(now=NOW, enqueue=True)

    [claim] = SendClaim.objects.all()
    queued = [mailbox for callback in callbacks for mailbox in callback.args[0]]
    assert queued == [(claim.credential_id, [str(claim.batch_id)])]
