"""outreach.sending.bounces.enrollment_mark_bounced: the rules every bounce source shares."""

from datetime import UTC, datetime

import pytest

from outreach.models.campaigns import Campaign
from outreach.models.contacts import Contact
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import CredentialCampaignStats, Enrollment
from outreach.sending.bounces import BOUNCE_RATE_MIN_SENDS, enrollment_mark_bounced, stats_increment
from tests.outreach.factories import (
    CampaignFactory,
    ContactFactory,
    CredentialFactory,
    EnrollmentFactory,
)
from tests.support.threads import at_once
from webhooks.models import Event

AT = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)


def _events(event_type: str) -> list[dict]:
    return [e.data for e in Event.objects.filter(type=event_type).order_by("created_at")]


def _sent_enrollment(campaign, credential, **kwargs) -> Enrollment:
    contact = ContactFactory(account=campaign.account, **kwargs)
    return EnrollmentFactory(
        campaign=campaign,
        contact=contact,
        credential=credential,
        status=Enrollment.Status.SENT,
        current_step=1,
        sent_at=AT,
        next_send_at=AT,
    )


def _keep_busy(campaign) -> None:
    """An enrollment still to send, so a bounce does not end the campaign's last active
    enrollment (which completes it: test_it_completes_the_campaign_with_its_last_enrollment)."""
    EnrollmentFactory(campaign=campaign, status=Enrollment.Status.SCHEDULED, next_send_at=AT)


@pytest.fixture
def campaign(db):
    campaign = CampaignFactory(with_steps=2, status=Campaign.Status.ACTIVE)
    return campaign


@pytest.fixture
def credential(campaign):
    return campaign.credentials.get()


def test_it_bounces_the_enrollment_suppresses_the_contact_and_emits(campaign, credential):
    enrollment = _sent_enrollment(campaign, credential, email="gone@example.org")

    assert enrollment_mark_bounced(enrollment=enrollment, reason="550 5.1.1 no such user", at=AT)

    enrollment.refresh_from_db()
    assert enrollment.status == "bounced"
    assert enrollment.bounced_at == AT
    assert enrollment.bounce_reason == "550 5.1.1 no such user"
    assert enrollment.next_send_at is None
    assert Contact.objects.get(pk=enrollment.contact_id).bounced_at == AT
    credential.refresh_from_db()
    assert credential.bounced_count == 1
    stats = CredentialCampaignStats.objects.get(credential=credential, campaign=campaign)
    assert (stats.sends, stats.bounces) == (0, 1)
    assert _events("enrollment.bounced") == [
        {
            "enrollment_id": str(enrollment.pk),
            "contact_id": str(enrollment.contact_id),
            "contact_email": "gone@example.org",
            "campaign_id": str(campaign.pk),
            "status": "bounced",
            "sent_at": "2026-03-02T10:00:00.000000Z",
            "replied_at": None,
            "bounce_reason": "550 5.1.1 no such user",
            "bounce_type": "hard",
            "bounce_category": "user_unknown",
        }
    ]


def test_it_changes_nothing_on_a_second_bounce(campaign, credential):
    enrollment = _sent_enrollment(campaign, credential)
    assert enrollment_mark_bounced(enrollment=enrollment, reason="first", at=AT)

    again = Enrollment.objects.get(pk=enrollment.pk)
    assert enrollment_mark_bounced(enrollment=again, reason="second") is False

    again.refresh_from_db()
    assert again.bounce_reason == "first"
    assert again.bounced_at == AT
    assert SmtpCredential.objects.get(pk=credential.pk).bounced_count == 1
    assert len(_events("enrollment.bounced")) == 1


def test_it_counts_a_rejection_at_send_as_a_send(campaign, credential):
    enrollment = _sent_enrollment(campaign, credential)
    enrollment_mark_bounced(enrollment=enrollment, reason="550", rejected_at_send=True)
    stats = CredentialCampaignStats.objects.get(credential=credential, campaign=campaign)
    assert (stats.sends, stats.bounces) == (1, 1)


def test_it_counts_the_bounce_on_the_given_credential(campaign, credential):
    other = CredentialFactory(account=campaign.account)
    enrollment = _sent_enrollment(campaign, credential)
    enrollment_mark_bounced(enrollment=enrollment, reason="550", credential=other)
    assert SmtpCredential.objects.get(pk=other.pk).bounced_count == 1
    assert SmtpCredential.objects.get(pk=credential.pk).bounced_count == 0


def test_it_does_not_judge_a_rate_before_the_minimum_sends(campaign, credential):
    stats_increment(
        credential_id=credential.pk, campaign_id=campaign.pk, sends=BOUNCE_RATE_MIN_SENDS - 2
    )
    # 19 sends, 1 bounce: 5.3%, over 5%, but too few sends to judge.
    enrollment_mark_bounced(
        enrollment=_sent_enrollment(campaign, credential), reason="550", rejected_at_send=True
    )
    credential.refresh_from_db()
    assert credential.disabled_at is None
    assert _events("credential.disabled") == []


def test_it_keeps_a_credential_exactly_at_the_threshold(campaign, credential):
    stats_increment(credential_id=credential.pk, campaign_id=campaign.pk, sends=20)
    enrollment_mark_bounced(enrollment=_sent_enrollment(campaign, credential), reason="550")
    credential.refresh_from_db()
    assert credential.disabled_at is None  # 1/20 = 5.0%, not above 5.0%


def test_it_disables_the_credential_and_pauses_the_campaign_once(campaign, credential):
    _keep_busy(campaign)
    stats_increment(credential_id=credential.pk, campaign_id=campaign.pk, sends=20)
    for _ in range(4):  # 10%, 15%, 20%: only the crossing fires
        enrollment_mark_bounced(
            enrollment=_sent_enrollment(campaign, credential), reason="550", at=AT
        )

    credential.refresh_from_db()
    assert credential.disabled_at == AT
    assert credential.disabled_reason == "bounce_rate_exceeded"
    assert _events("credential.disabled") == [
        {
            "credential_id": str(credential.pk),
            "from_email": credential.from_email,
            "campaign_id": str(campaign.pk),
            "bounce_rate": 10.0,
            "threshold": 5.0,
        }
    ]
    campaign.refresh_from_db()
    assert campaign.status == "paused"
    assert campaign.paused_reason == "all_credentials_disabled"
    assert _events("campaign.paused") == [
        {
            "campaign_id": str(campaign.pk),
            "name": campaign.name,
            "reason": "all_credentials_disabled",
        }
    ]
    assert len(_events("enrollment.bounced")) == 4


def test_it_uses_the_campaign_threshold(credential, campaign):
    Campaign.objects.filter(pk=campaign.pk).update(bounce_threshold_percent=12.5)
    campaign.refresh_from_db()
    stats_increment(credential_id=credential.pk, campaign_id=campaign.pk, sends=20)
    for _ in range(2):  # 10%: under 12.5%
        enrollment_mark_bounced(enrollment=_sent_enrollment(campaign, credential), reason="550")
    assert SmtpCredential.objects.get(pk=credential.pk).disabled_at is None
    enrollment_mark_bounced(enrollment=_sent_enrollment(campaign, credential), reason="550")
    assert _events("credential.disabled")[0]["bounce_rate"] == 15.0
    assert _events("credential.disabled")[0]["threshold"] == 12.5


def test_it_rates_each_campaign_separately(campaign, credential):
    other_campaign = CampaignFactory(
        account=campaign.account, with_credential=False, status=Campaign.Status.ACTIVE
    )
    other_campaign.credentials.add(credential)
    _keep_busy(campaign)
    _keep_busy(other_campaign)
    stats_increment(credential_id=credential.pk, campaign_id=campaign.pk, sends=100)
    stats_increment(credential_id=credential.pk, campaign_id=other_campaign.pk, sends=20)
    enrollment_mark_bounced(enrollment=_sent_enrollment(campaign, credential), reason="550")
    enrollment_mark_bounced(enrollment=_sent_enrollment(campaign, credential), reason="550")
    assert SmtpCredential.objects.get(pk=credential.pk).disabled_at is None  # 2% in campaign
    enrollment_mark_bounced(enrollment=_sent_enrollment(other_campaign, credential), reason="550")
    enrollment_mark_bounced(enrollment=_sent_enrollment(other_campaign, credential), reason="550")
    # 10% in the other campaign: disabled, and both campaigns lose their only mailbox.
    assert _events("credential.disabled")[0]["campaign_id"] == str(other_campaign.pk)
    paused = {e["campaign_id"] for e in _events("campaign.paused")}
    assert paused == {str(campaign.pk), str(other_campaign.pk)}


def test_it_keeps_a_campaign_active_while_another_credential_is_enabled(campaign, credential):
    spare = CredentialFactory(account=campaign.account)
    campaign.credentials.add(spare)
    _keep_busy(campaign)
    stats_increment(credential_id=credential.pk, campaign_id=campaign.pk, sends=20)
    for _ in range(2):
        enrollment_mark_bounced(enrollment=_sent_enrollment(campaign, credential), reason="550")
    assert len(_events("credential.disabled")) == 1
    campaign.refresh_from_db()
    assert campaign.status == "active"
    assert _events("campaign.paused") == []


def test_it_does_not_pause_a_campaign_that_is_not_active(campaign, credential):
    Campaign.objects.filter(pk=campaign.pk).update(status=Campaign.Status.PAUSED)
    stats_increment(credential_id=credential.pk, campaign_id=campaign.pk, sends=20)
    for _ in range(2):
        enrollment_mark_bounced(enrollment=_sent_enrollment(campaign, credential), reason="550")
    assert len(_events("credential.disabled")) == 1
    assert _events("campaign.paused") == []
    campaign.refresh_from_db()
    assert campaign.paused_reason == ""


def test_it_fires_nothing_for_a_credential_already_disabled(campaign, credential):
    SmtpCredential.objects.filter(pk=credential.pk).update(disabled_at=AT, disabled_reason="manual")
    stats_increment(credential_id=credential.pk, campaign_id=campaign.pk, sends=20)
    for _ in range(3):
        enrollment_mark_bounced(enrollment=_sent_enrollment(campaign, credential), reason="550")
    credential.refresh_from_db()
    assert credential.disabled_reason == "manual"
    assert _events("credential.disabled") == []
    assert _events("campaign.paused") == []


def test_it_bounces_without_a_credential(campaign):
    enrollment = _sent_enrollment(campaign, None)
    assert enrollment_mark_bounced(enrollment=enrollment, reason="")
    enrollment.refresh_from_db()
    assert enrollment.bounce_reason == "bounced"
    assert CredentialCampaignStats.objects.count() == 0


# --- concurrency (real row locks between connections) ----------------------------------


def test_it_disables_once_under_concurrent_bounces(live_db):
    campaign = CampaignFactory(status=Campaign.Status.ACTIVE)
    credential = campaign.credentials.get()
    stats_increment(credential_id=credential.pk, campaign_id=campaign.pk, sends=20)
    enrollments = [_sent_enrollment(campaign, credential) for _ in range(6)]

    at_once(
        [
            lambda e=e: enrollment_mark_bounced(enrollment=e, reason="550 rejected")
            for e in enrollments
        ]
    )

    assert len(_events("enrollment.bounced")) == 6
    assert len(_events("credential.disabled")) == 1
    assert len(_events("campaign.paused")) == 1


def test_it_pauses_once_when_two_credentials_are_disabled_concurrently(live_db):
    campaign = CampaignFactory(status=Campaign.Status.ACTIVE)
    first = campaign.credentials.get()
    second = CredentialFactory(account=campaign.account)
    campaign.credentials.add(second)
    calls = []
    for credential in (first, second):
        stats_increment(credential_id=credential.pk, campaign_id=campaign.pk, sends=20)
        for _ in range(2):
            enrollment = _sent_enrollment(campaign, credential)
            calls.append(lambda e=enrollment: enrollment_mark_bounced(enrollment=e, reason="550"))

    at_once(calls)

    assert len(_events("credential.disabled")) == 2
    assert len(_events("campaign.paused")) == 1
    campaign.refresh_from_db()
    assert campaign.status == "paused"


def test_it_completes_the_campaign_with_its_last_enrollment(campaign, credential):
    first = _sent_enrollment(campaign, credential)
    last = _sent_enrollment(campaign, credential)
    enrollment_mark_bounced(enrollment=first, reason="550", at=AT)
    assert Campaign.objects.get(pk=campaign.pk).status == "active"
    enrollment_mark_bounced(enrollment=last, reason="550", at=AT)
    assert Campaign.objects.get(pk=campaign.pk).status == "completed"
