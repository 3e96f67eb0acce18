"""The test clock: `POST /campaigns/:id/advance` (docs/sandbox.md, "Test clock")."""

from datetime import timedelta

import pytest
from django.utils import timezone

from outreach.campaigns import clock
from outreach.models.campaigns import Campaign
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Enrollment, Message
from tests.outreach.factories import CampaignFactory, CredentialFactory
from tests.outreach.helpers import assert_error, assert_fields
from tests.outreach.test_simulator_sending import enroll, run, simulated_campaign, simulator_mailbox
from webhooks.models import Event

pytestmark = pytest.mark.django_db

DAY = 24 * 60


def _advance(client, campaign, minutes, **headers):
    return client.post(
        f"/campaigns/{campaign.pk}/advance", {"minutes": minutes}, format="json", **headers
    )


def test_a_three_step_campaign_with_day_long_delays_runs_to_its_end_in_seconds(
    api_client, account, monkeypatch, django_capture_on_commit_callbacks
):
    """Through the API, then the send scheduler and the sending of its batches in this
    process (as the sending tests run them), each time the scheduler is rung."""
    rung = []
    monkeypatch.setattr(clock, "sends_schedule_soon", lambda: rung.append(run(timezone.now())))
    mailbox = api_client.post(
        "/smtp_credentials/simulator", {"from_email": "me@acme.example"}, format="json"
    ).json()
    steps = [
        {"subject": "One", "body_text": "Hi {{first_name}}", "delay_minutes": 0},
        {"subject": "Two", "body_text": "Again", "delay_minutes": DAY},
        {"subject": "Three", "body_text": "Last", "delay_minutes": 2 * DAY},
    ]
    campaign = api_client.post(
        "/campaigns",
        {"name": "Rehearsal", "credential_ids": [mailbox["id"]], "steps": steps},
        format="json",
    ).json()
    created = api_client.post(
        "/outreaches",
        {"campaign_id": campaign["id"], "contact": {"email": "ada@simulator.test"}},
        format="json",
    )
    assert created.status_code == 201, created.content
    run(timezone.now())
    enrollment = Enrollment.objects.get()
    assert Message.objects.count() == 1

    advanced = []
    for minutes in (DAY, 2 * DAY):
        with django_capture_on_commit_callbacks(execute=True):
            response = _advance(api_client, Campaign.objects.get(pk=campaign["id"]), minutes)
        assert response.status_code == 200, response.content
        advanced.append(response.json())

    assert advanced == [{"campaign_id": campaign["id"], "moved": 1}] * 2
    assert len(rung) == 2
    enrollment.refresh_from_db()
    assert (enrollment.status, enrollment.current_step) == ("completed", 3)
    assert [m.subject for m in Message.objects.order_by("step")] == ["One", "Two", "Three"]
    sent = Event.objects.filter(type="enrollment.sent").order_by("created_at")
    assert [e.data["status"] for e in sent] == ["sent", "sent", "completed"]
    assert Campaign.objects.get(pk=campaign["id"]).status == "completed"
    # Nothing left to move.
    assert _advance(api_client, Campaign.objects.get(pk=campaign["id"]), DAY).json()["moved"] == 0


def test_it_moves_every_wait_still_ahead(api_client, account):
    now = timezone.now()
    campaign = simulated_campaign(account=account)
    mailbox = campaign.credentials.get()
    SmtpCredential.objects.filter(pk=mailbox.pk).update(
        min_interval_seconds=60,
        max_interval_seconds=60,
        next_send_earliest_at=now + timedelta(hours=1),
    )
    later = enroll(campaign, "a@simulator.test", at=now + timedelta(days=2))
    due = enroll(campaign, "b@simulator.test", at=now - timedelta(minutes=5))
    at_branch = enroll(campaign, "c@simulator.test", at=now)
    Enrollment.objects.filter(pk=at_branch.pk).update(
        status=Enrollment.Status.SENT,
        next_send_at=None,
        branch_deadline=now + timedelta(days=1),
        held_until=now + timedelta(days=3),
    )
    ended = enroll(campaign, "d@simulator.test", at=now + timedelta(days=1))
    Enrollment.objects.filter(pk=ended.pk).update(status=Enrollment.Status.STOPPED)

    response = _advance(api_client, campaign, 60)

    assert response.json() == {"campaign_id": str(campaign.pk), "moved": 4}
    for row in (later, due, at_branch, ended):
        row.refresh_from_db()
    assert later.next_send_at == now + timedelta(days=2, hours=-1)
    assert due.next_send_at == now - timedelta(minutes=5)  # due already: not a wait
    assert at_branch.branch_deadline == now + timedelta(days=1, hours=-1)
    assert at_branch.held_until == now + timedelta(days=3, hours=-1)
    assert ended.next_send_at == now + timedelta(days=1)  # ended: nothing waits
    mailbox.refresh_from_db()
    assert mailbox.next_send_earliest_at == now


def test_it_rings_the_scheduler_when_it_moved_something(
    api_client, account, monkeypatch, django_capture_on_commit_callbacks
):
    rung = []
    monkeypatch.setattr(clock, "sends_schedule_soon", lambda: rung.append(True))
    campaign = simulated_campaign(account=account)
    enroll(campaign, "a@simulator.test", at=timezone.now() + timedelta(days=1))
    with django_capture_on_commit_callbacks(execute=True):
        _advance(api_client, campaign, 10)
    assert rung == [True]


@pytest.mark.parametrize("status", [Campaign.Status.DRAFT, Campaign.Status.COMPLETED])
def test_a_draft_or_completed_campaign_moves_nothing(api_client, account, status):
    campaign = simulated_campaign(account=account)
    Campaign.objects.filter(pk=campaign.pk).update(status=status)
    waiting = enroll(campaign, "a@simulator.test", at=timezone.now() + timedelta(days=1))
    assert _advance(api_client, campaign, 10).json()["moved"] == 0
    before = waiting.next_send_at
    waiting.refresh_from_db()
    assert waiting.next_send_at == before


def test_a_campaign_with_a_real_mailbox_is_not_simulated(api_client, account):
    campaign = simulated_campaign(account=account)
    real = CredentialFactory(account=account, disabled_at=timezone.now())  # disabled: still real
    campaign.credentials.add(real)
    waiting = enroll(campaign, "someone@example.org", at=timezone.now() + timedelta(days=1))
    body = assert_error(_advance(api_client, campaign, 10), 409, "campaign_not_simulated")
    assert body["details"] == {"real_credential_ids": [str(real.pk)]}
    before = waiting.next_send_at
    waiting.refresh_from_db()
    assert waiting.next_send_at == before


def test_a_campaign_without_mailboxes_is_not_simulated(api_client, account):
    campaign = CampaignFactory(account=account, with_credential=False)
    body = assert_error(_advance(api_client, campaign, 10), 409, "campaign_not_simulated")
    assert body["details"] == {"real_credential_ids": []}


@pytest.mark.parametrize(
    "body",
    [{}, {"minutes": 0}, {"minutes": 527_041}, {"minutes": "soon"}, {"minutes": 5, "x": 1}],
)
def test_invalid_bodies_are_validation_failed(api_client, account, body):
    campaign = simulated_campaign(account=account)
    response = api_client.post(f"/campaigns/{campaign.pk}/advance", body, format="json")
    assert_fields(response, *(set(body) - {"minutes"} or {"minutes"}))


def test_another_accounts_campaign_is_not_found(other_client, account):
    campaign = simulated_campaign(account=account)
    assert_error(_advance(other_client, campaign, 10), 404, "campaign_not_found")


def test_an_idempotency_key_replays_the_first_answer(api_client, account):
    campaign = simulated_campaign(account=account)
    waiting = enroll(campaign, "a@simulator.test", at=timezone.now() + timedelta(days=1))
    first = _advance(api_client, campaign, 60, HTTP_IDEMPOTENCY_KEY="advance-1")
    again = _advance(api_client, campaign, 60, HTTP_IDEMPOTENCY_KEY="advance-1")
    assert again["Idempotent-Replay"] == "true"
    assert again.content == first.content
    moved_once = waiting.next_send_at - timedelta(minutes=60)
    waiting.refresh_from_db()
    assert waiting.next_send_at == moved_once


def test_only_the_campaigns_mailboxes_pace_moves(api_client, account):
    now = timezone.now()
    campaign = simulated_campaign(account=account)
    other = simulator_mailbox(account, next_send_earliest_at=now + timedelta(hours=1))
    campaign.credentials.add(other)
    unrelated = simulator_mailbox(account, next_send_earliest_at=now + timedelta(hours=1))
    _advance(api_client, campaign, 30)
    other.refresh_from_db()
    unrelated.refresh_from_db()
    assert other.next_send_earliest_at == now + timedelta(minutes=30)
    assert unrelated.next_send_earliest_at == now + timedelta(hours=1)
