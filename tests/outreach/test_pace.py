"""Mailbox pace: a random gap in [min_interval_seconds, max_interval_seconds] between two
sends of a mailbox, across every campaign that uses it, with a controllable clock and a
real SMTP server (tests/support/smtp.py); and the fields' API."""

import contextlib
import threading
from datetime import UTC, datetime, timedelta
from itertools import pairwise

import pytest
from django.db import connections
from django.utils import timezone

from outreach.mailboxes import api
from outreach.models.campaigns import Campaign
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Enrollment, Message, SendClaim
from outreach.sending import scheduler
from outreach.sending.scheduler import schedule_due
from outreach.sending.send import batch_send
from tests.outreach.factories import (
    CampaignFactory,
    ContactFactory,
    CredentialFactory,
    EnrollmentFactory,
)
from tests.outreach.helpers import assert_fields

# A Monday, 10:00 UTC.
NOW = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
TICK = timedelta(seconds=5)  # a scheduler interval (the default is 1 s)


def _mailbox(sink, *, low=120, high=300, **extra) -> SmtpCredential:
    return CredentialFactory(
        smtp_host=sink.host,
        smtp_port=sink.port,
        smtp_security="none",
        smtp_username="",
        smtp_password="",
        min_interval_seconds=low,
        max_interval_seconds=high,
        **extra,
    )


def _campaign_on(credential: SmtpCredential) -> Campaign:
    campaign = CampaignFactory(
        account=credential.account, status=Campaign.Status.ACTIVE, with_credential=False
    )
    campaign.credentials.add(credential)
    return campaign


def _enroll(campaign, *, at=NOW) -> Enrollment:
    return EnrollmentFactory(
        campaign=campaign,
        contact=ContactFactory(account=campaign.account),
        status=Enrollment.Status.SCHEDULED,
        next_send_at=at,
        dispatched_at=at,
    )


def _send(batches, now) -> None:
    for batch in batches:
        batch_send(batch_id=batch.batch_id, credential_id=batch.credential_id, clock=lambda: now)


def _sent_times(credential) -> list[datetime]:
    return sorted(Message.objects.filter(credential=credential).values_list("sent_at", flat=True))


# --- the scheduler ---------------------------------------------------------------------


@pytest.mark.django_db
def test_a_mailbox_shared_by_two_campaigns_keeps_its_gaps_within_its_interval(smtp_sink):
    sink = smtp_sink()
    credential = _mailbox(sink)
    first, second = _campaign_on(credential), _campaign_on(credential)
    for _ in range(4):
        _enroll(first)
        _enroll(second)

    now, claims = NOW, 0
    while Message.objects.count() < 8 and now < NOW + timedelta(hours=2):
        batches = scheduler.schedule_due(now=now)
        if batches:
            # One send per run, and the next one a drawn gap away.
            assert [b.size for b in batches] == [1]
            claims += 1
            credential.refresh_from_db()
            gap = credential.next_send_earliest_at - now
            assert timedelta(seconds=120) <= gap <= timedelta(seconds=300)
        _send(batches, now)
        now += TICK

    assert claims == len(sink.messages) == 8
    gaps = [b - a for a, b in pairwise(_sent_times(credential))]
    # The drawn gap, then the first scheduler tick at or after it.
    assert all(timedelta(seconds=120) <= g <= timedelta(seconds=300) + TICK for g in gaps), gaps
    assert len(set(gaps)) > 1  # drawn at random, not a fixed interval
    sent_by = set(Message.objects.values_list("enrollment__campaign_id", flat=True))
    assert sent_by == {first.pk, second.pk}


@pytest.mark.django_db
def test_an_unpaced_mailbox_still_sends_a_burst(smtp_sink):
    sink = smtp_sink()
    credential = _mailbox(sink, low=0, high=0)
    campaign = _campaign_on(credential)
    for _ in range(5):
        _enroll(campaign)
    batches = schedule_due(now=NOW)
    assert [b.size for b in batches] == [5]
    _send(batches, NOW)
    assert len(sink.messages) == 5
    credential.refresh_from_db()
    assert credential.next_send_earliest_at is None


@pytest.mark.django_db
def test_turning_the_pace_off_lifts_a_pending_wait(smtp_sink):
    sink = smtp_sink()
    credential = _mailbox(sink, low=600, high=600)
    campaign = _campaign_on(credential)
    for _ in range(3):
        _enroll(campaign)
    assert [b.size for b in schedule_due(now=NOW)] == [1]
    assert schedule_due(now=NOW + TICK) == []  # claimed, then paced
    SendClaim.objects.all().delete()
    SmtpCredential.objects.filter(pk=credential.pk).update(
        min_interval_seconds=0, max_interval_seconds=0
    )
    Enrollment.objects.update(next_send_at=NOW)
    assert [b.size for b in schedule_due(now=NOW + 2 * TICK)] == [3]


@pytest.mark.django_db
def test_a_late_send_still_keeps_the_minimum_before_the_next(smtp_sink):
    """The gap is drawn at the claim; a send that leaves later raises the mailbox's next
    send to at least its own time + min_interval_seconds (both record paths)."""
    sink = smtp_sink()
    credential = _mailbox(sink, low=130, high=130)
    campaign = _campaign_on(credential)
    _enroll(campaign)
    _enroll(campaign)
    [batch] = schedule_due(now=NOW)
    credential.refresh_from_db()
    assert credential.next_send_earliest_at == NOW + timedelta(seconds=130)

    late = NOW + timedelta(seconds=100)
    _send([batch], late)

    credential.refresh_from_db()
    assert credential.next_send_earliest_at == late + timedelta(seconds=130)
    assert schedule_due(now=NOW + timedelta(seconds=130)) == []  # the minimum holds
    [nxt] = schedule_due(now=late + timedelta(seconds=130))
    assert nxt.size == 1


@pytest.mark.django_db
def test_a_slow_server_keeps_the_minimum_from_its_reply(smtp_sink):
    """The minimum counts from the server's reply to the message, not from the send's
    start: a session that took long must not bring the next send closer, as the server
    sees the two messages."""
    sink = smtp_sink()
    credential = _mailbox(sink, low=130, high=130)
    campaign = _campaign_on(credential)
    _enroll(campaign)
    _enroll(campaign)
    [batch] = schedule_due(now=NOW)
    replied = NOW + timedelta(seconds=45)  # the server answered the end of DATA 45 s on
    clock = iter([NOW])  # the send starts at NOW; every later reading is the reply's time
    batch_send(
        batch_id=batch.batch_id,
        credential_id=batch.credential_id,
        clock=lambda: next(clock, replied),
    )

    credential.refresh_from_db()
    assert credential.next_send_earliest_at == replied + timedelta(seconds=130)
    assert Message.objects.get().sent_at == NOW  # the send's time, as recorded before
    assert schedule_due(now=NOW + timedelta(seconds=170)) == []  # 125 s after the reply
    [nxt] = schedule_due(now=replied + timedelta(seconds=130))
    assert nxt.size == 1


@pytest.mark.django_db
def test_a_claim_that_does_not_send_keeps_the_pace_it_took(smtp_sink):
    sink = smtp_sink()
    sink.reject_rcpt("busy@example.org", "451 4.3.0 Try again later", times=1)
    credential = _mailbox(sink, low=200, high=200)
    campaign = _campaign_on(credential)
    EnrollmentFactory(
        campaign=campaign,
        contact=ContactFactory(account=campaign.account, email="busy@example.org"),
        status=Enrollment.Status.SCHEDULED,
        next_send_at=NOW,
    )
    _send(schedule_due(now=NOW), NOW)

    assert sink.messages == []
    credential.refresh_from_db()
    # Retried later, and the mailbox still waits its gap: never closer, a turn lost.
    assert credential.next_send_earliest_at == NOW + timedelta(seconds=200)
    assert credential.daily_sent_count == 0


@pytest.mark.django_db
def test_enrollments_waiting_for_a_paced_mailbox_do_not_fill_the_scan(smtp_sink, settings):
    settings.SENDING_BATCH_SIZE = 1
    settings.SENDING_MAX_PER_TICK = 2
    sink = smtp_sink()
    slow = _mailbox(sink, low=600, high=600)
    fast = _mailbox(sink, low=0, high=0, account=slow.account)
    backlog = _campaign_on(slow)
    for minute in range(5):
        _enroll(backlog, at=NOW - timedelta(minutes=10 - minute))  # the oldest due
    other = _enroll(_campaign_on(fast))

    # Two enrollments examined per run: the slow mailbox's oldest, then, its others
    # being left out of the scan once it is paced, the other mailbox's.
    batches = schedule_due(now=NOW)
    assert sorted(b.credential_id for b in batches) == sorted([slow.pk, fast.pk])
    assert SendClaim.objects.filter(enrollment=other).exists()
    _send(batches, NOW)
    assert schedule_due(now=NOW + TICK) == []
    # The waiting ones are not rewritten: they keep their place in line.
    waiting = Enrollment.objects.filter(campaign=backlog, current_step=0)
    assert waiting.count() == 4
    assert max(waiting.values_list("next_send_at", flat=True)) == NOW - timedelta(minutes=6)


@pytest.mark.django_db
def test_a_new_thread_goes_to_the_campaigns_mailbox_that_may_send(smtp_sink):
    sink = smtp_sink()
    paced = _mailbox(sink, low=300, high=300)
    SmtpCredential.objects.filter(pk=paced.pk).update(
        next_send_earliest_at=NOW + timedelta(minutes=1)
    )
    free = _mailbox(sink, low=300, high=300, account=paced.account)
    campaign = _campaign_on(paced)
    campaign.credentials.add(free)
    _enroll(campaign)
    _enroll(campaign)
    [batch] = schedule_due(now=NOW)
    assert (batch.credential_id, batch.size) == (free.pk, 1)
    # A minute later the first mailbox may send again: it takes the other thread.
    [batch] = schedule_due(now=NOW + timedelta(minutes=1))
    assert batch.credential_id == paced.pk


@pytest.mark.parametrize("bypass_run_lock", [False, True])
def test_racing_scheduler_runs_never_send_closer_than_the_minimum(
    live_db, smtp_sink, settings, monkeypatch, bypass_run_lock
):
    """Two runs at every tick, at once. With the run lock one of them returns at once.
    Without it, each run takes one enrollment of the mailbox (its own rows, SKIP LOCKED)
    and both are held until the other has too, so both decide about the mailbox at the
    same moment: its row's lock lets one claim."""
    sink = smtp_sink()
    decided = threading.local()
    if bypass_run_lock:
        settings.SENDING_BATCH_SIZE = 1
        real_decide = scheduler._decide

        def decide_together(enrollments, **kwargs):
            if not getattr(decided, "once", False):
                decided.once = True
                # Broken when the other run had nothing to examine.
                with contextlib.suppress(threading.BrokenBarrierError):
                    together.wait(timeout=5)
            return real_decide(enrollments, **kwargs)

        monkeypatch.setattr(scheduler, "_decide", decide_together)
    credential = _mailbox(sink, low=120, high=180)
    first, second = _campaign_on(credential), _campaign_on(credential)
    for _ in range(3):
        _enroll(first)
        _enroll(second)

    def run(now, out, errors, barrier):
        decided.once = False
        try:
            barrier.wait()
            if bypass_run_lock:
                out.extend(scheduler._schedule_due(now=now, enqueue=False))
            else:
                out.extend(scheduler.schedule_due(now=now))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    now = NOW
    while Message.objects.count() < 6 and now < NOW + timedelta(hours=1):
        batches, errors, barrier = [], [], threading.Barrier(2)
        together = threading.Barrier(2)
        threads = [
            threading.Thread(target=run, args=(now, batches, errors, barrier)) for _ in range(2)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert errors == []
        assert sum(b.size for b in batches) <= 1
        _send(batches, now)
        now += TICK

    assert len(sink.messages) == 6
    gaps = [b - a for a, b in pairwise(_sent_times(credential))]
    assert all(timedelta(seconds=120) <= g <= timedelta(seconds=180) + TICK for g in gaps), gaps


# --- the API -----------------------------------------------------------------------------


def _create(api_client, **fields):
    body = {"from_email": "pace@example.com", "smtp_host": "smtp.example.com", **fields}
    return api_client.post("/smtp_credentials", body, format="json")


@pytest.fixture
def no_verify(monkeypatch):
    """Creating a mailbox checks it at once; these tests are about its fields."""

    monkeypatch.setattr(api, "credential_verify", lambda credential: {"smtp": None, "imap": None})


def test_a_new_mailbox_is_paced_by_default(api_client, no_verify):
    response = _create(api_client)
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["min_interval_seconds"], body["max_interval_seconds"]) == (120, 300)
    assert body["next_send_earliest_at"] is None


def test_the_pace_can_be_set_and_turned_off(api_client, no_verify):
    body = _create(api_client, min_interval_seconds=30, max_interval_seconds=90).json()
    assert (body["min_interval_seconds"], body["max_interval_seconds"]) == (30, 90)
    response = api_client.patch(
        f"/smtp_credentials/{body['id']}",
        {"min_interval_seconds": 0, "max_interval_seconds": 0},
        format="json",
    )
    assert response.status_code == 200, response.content
    assert (response.json()["min_interval_seconds"], response.json()["max_interval_seconds"]) == (
        0,
        0,
    )


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"min_interval_seconds": 301}, "min_interval_seconds"),  # above the default max
        ({"min_interval_seconds": 60, "max_interval_seconds": 30}, "min_interval_seconds"),
        ({"max_interval_seconds": 86_401}, "max_interval_seconds"),
        ({"min_interval_seconds": -1}, "min_interval_seconds"),
        ({"max_interval_seconds": "soon"}, "max_interval_seconds"),
        ({"min_interval_seconds": None}, "min_interval_seconds"),
    ],
)
def test_an_invalid_pace_is_refused_and_nothing_is_written(api_client, no_verify, fields, named):
    assert_fields(_create(api_client, **fields), named)
    assert not SmtpCredential.objects.exists()


def test_a_patch_is_checked_against_the_stored_pace(api_client, account, no_verify):
    credential = CredentialFactory(
        account=account, min_interval_seconds=60, max_interval_seconds=90
    )
    response = api_client.patch(
        f"/smtp_credentials/{credential.pk}", {"max_interval_seconds": 59}, format="json"
    )
    messages = assert_fields(response, "max_interval_seconds")
    assert messages == {
        "max_interval_seconds": [
            "min_interval_seconds (60) must not exceed max_interval_seconds (59)."
        ]
    }
    credential.refresh_from_db()
    assert credential.max_interval_seconds == 90


def test_next_send_earliest_at_is_read_only(api_client, account):
    credential = CredentialFactory(account=account, min_interval_seconds=1, max_interval_seconds=2)
    SmtpCredential.objects.filter(pk=credential.pk).update(next_send_earliest_at=NOW)
    response = api_client.patch(
        f"/smtp_credentials/{credential.pk}",
        {"next_send_earliest_at": "2030-01-01T00:00:00Z"},
        format="json",
    )
    assert response.status_code == 422, response.content
    assert list(response.json()["details"]["fields"]) == ["next_send_earliest_at"]
    response = api_client.patch(
        f"/smtp_credentials/{credential.pk}",
        {"next_send_earliest_at": "2026-03-02T10:00:00.000000Z"},
        format="json",
    )
    assert response.status_code == 200, response.content
    assert response.json()["next_send_earliest_at"] == "2026-03-02T10:00:00.000000Z"


def test_next_send_earliest_at_follows_a_pace_change(api_client, account):
    """A mailbox paced 2 to 5 minutes, due 4 minutes from now: turning pacing off lets it
    send now; a shorter pace brings its next send closer; other changes keep it."""
    credential = CredentialFactory(
        account=account, min_interval_seconds=120, max_interval_seconds=300
    )
    later = timezone.now() + timedelta(minutes=4)
    SmtpCredential.objects.filter(pk=credential.pk).update(next_send_earliest_at=later)
    url = f"/smtp_credentials/{credential.pk}"

    body = api_client.patch(url, {"from_name": "Ada"}, format="json").json()
    assert body["next_send_earliest_at"] is not None  # the pace did not change

    before = timezone.now()
    body = api_client.patch(
        url, {"min_interval_seconds": 5, "max_interval_seconds": 10}, format="json"
    ).json()
    credential.refresh_from_db()
    assert before + timedelta(seconds=5) <= credential.next_send_earliest_at
    assert credential.next_send_earliest_at <= timezone.now() + timedelta(seconds=10)

    body = api_client.patch(
        url, {"min_interval_seconds": 0, "max_interval_seconds": 0}, format="json"
    ).json()
    assert body["next_send_earliest_at"] is None
