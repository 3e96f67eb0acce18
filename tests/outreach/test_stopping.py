"""Enrollments stopped by hand (POST /campaigns/:id/enrollments/:enrollment_id/stop) and
the `stopped` status everywhere: filters, stats, completion, the sending engine."""

import uuid
from datetime import UTC, datetime

import pytest

from outreach.campaigns.stopping import enrollment_stop
from outreach.models.campaigns import Campaign
from outreach.models.sending import Enrollment, Message
from outreach.sending.scheduler import schedule_due
from outreach.sending.send import batch_send
from tests.outreach.factories import CampaignFactory, ContactFactory, EnrollmentFactory
from tests.outreach.helpers import assert_error
from webhooks.models import Event

NOW = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)

pytestmark = pytest.mark.django_db


def _stop_url(campaign, enrollment_id) -> str:
    return f"/campaigns/{campaign.pk}/enrollments/{enrollment_id}/stop"


@pytest.fixture
def campaign(account):
    return CampaignFactory(account=account, status=Campaign.Status.ACTIVE)


def _enrollment(campaign, **kwargs) -> Enrollment:
    kwargs.setdefault("status", Enrollment.Status.SCHEDULED)
    kwargs.setdefault("next_send_at", NOW)
    return EnrollmentFactory(
        campaign=campaign, contact=ContactFactory(account=campaign.account), **kwargs
    )


@pytest.mark.parametrize("status", ["pending", "scheduled", "sent"])
def test_it_stops_an_active_enrollment_by_hand(api_client, campaign, status):
    enrollment = _enrollment(campaign, status=status)
    _enrollment(campaign)  # keeps the campaign active

    response = api_client.post(_stop_url(campaign, enrollment.pk))

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["id"] == str(enrollment.pk)
    assert body["status"] == "stopped"
    assert body["stop_reason"] == "manual"
    assert body["stopped_at"] is not None
    assert body["next_send_at"] is None
    enrollment.refresh_from_db()
    assert enrollment.status == Enrollment.Status.STOPPED
    assert not Event.objects.exists()  # the contact did nothing: no event
    campaign.refresh_from_db()
    assert campaign.status == Campaign.Status.ACTIVE


@pytest.mark.parametrize(
    "status", ["completed", "replied", "bounced", "unsubscribed", "failed", "stopped"]
)
def test_an_ended_enrollment_is_not_active(api_client, campaign, status):
    enrollment = _enrollment(campaign, status=status, next_send_at=None)

    body = assert_error(
        api_client.post(_stop_url(campaign, enrollment.pk)), 409, "enrollment_not_active"
    )

    assert body["details"] == {"status": status}
    enrollment.refresh_from_db()
    assert enrollment.status == status
    assert enrollment.stopped_at is None or status == "stopped"


def test_unknown_and_foreign_enrollments_are_not_found(api_client, account, campaign):
    other_campaign = CampaignFactory(account=account, status=Campaign.Status.ACTIVE)
    in_other_campaign = _enrollment(other_campaign)
    foreign_campaign = CampaignFactory(status=Campaign.Status.ACTIVE)
    foreign = _enrollment(foreign_campaign)

    for enrollment_id in (uuid.uuid4(), "not-a-uuid", in_other_campaign.pk):
        assert_error(
            api_client.post(_stop_url(campaign, enrollment_id)), 404, "enrollment_not_found"
        )
    # Another account's campaign answers like an unknown one.
    assert_error(
        api_client.post(_stop_url(foreign_campaign, foreign.pk)), 404, "campaign_not_found"
    )
    for row in (in_other_campaign, foreign):
        row.refresh_from_db()
        assert row.status == Enrollment.Status.SCHEDULED


def test_only_post_stops(api_client, campaign):
    enrollment = _enrollment(campaign)
    assert_error(api_client.get(_stop_url(campaign, enrollment.pk)), 405, "method_not_allowed")


def test_stopping_the_last_active_enrollment_completes_the_campaign(api_client, campaign):
    _enrollment(campaign, status=Enrollment.Status.REPLIED, next_send_at=None)
    last = _enrollment(campaign)

    assert api_client.post(_stop_url(campaign, last.pk)).status_code == 200

    campaign.refresh_from_db()
    assert campaign.status == Campaign.Status.COMPLETED


def test_stopped_joins_the_filter_and_the_stats(api_client, campaign):
    stopped = _enrollment(campaign)
    _enrollment(campaign)
    api_client.post(_stop_url(campaign, stopped.pk))

    listed = api_client.get(f"/campaigns/{campaign.pk}/enrollments?status=stopped").json()
    assert [e["id"] for e in listed] == [str(stopped.pk)]
    assert api_client.get(f"/campaigns/{campaign.pk}").json()["stats"]["stopped"] == 1
    stats = api_client.get(f"/campaigns/{campaign.pk}/stats").json()
    assert stats["stopped"] == 1 and stats["enrolled"] == 2


def test_a_claimed_enrollment_stopped_before_its_send_is_not_sent(smtp_sink):
    sink = smtp_sink()
    campaign = CampaignFactory(status=Campaign.Status.ACTIVE)
    credential = campaign.credentials.get()
    credential.smtp_host, credential.smtp_port = sink.host, sink.port
    credential.smtp_security, credential.smtp_username = "none", ""
    credential.save()
    stopped = _enrollment(campaign)
    sent = _enrollment(campaign)

    [batch] = schedule_due(now=NOW)  # both claimed
    assert enrollment_stop(enrollment_id=stopped.pk, at=NOW)
    result = batch_send(
        batch_id=batch.batch_id, credential_id=batch.credential_id, clock=lambda: NOW
    )

    assert result.sent == 1 and result.skipped == 1
    assert [m.rcpt_tos for m in sink.messages] == [[sent.contact.email]]
    assert not Message.objects.filter(enrollment=stopped).exists()
    stopped.refresh_from_db()
    assert stopped.status == Enrollment.Status.STOPPED and stopped.next_send_at is None
