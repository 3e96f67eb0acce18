"""An intake signal (reply, unsubscribe, complaint, bounce) that ends an active
campaign's last active enrollment completes the campaign, as the sending engine does
after its last send."""

import pytest
from django.test import Client

from outreach.intake.services import contact_unsubscribe, enrollment_mark_replied
from outreach.models.campaigns import Campaign
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Enrollment
from outreach.sending import tokens
from outreach.sending.bounces import enrollment_mark_bounced
from tests.intake.factories import first_message, sent_enrollment
from tests.intake.relay_signing import (
    MAILGUN_KEY,
    mailgun_body,
    mailgun_complained,
    mailgun_failed,
)
from tests.outreach.factories import EnrollmentFactory

pytestmark = pytest.mark.django_db


def status(enrollment) -> str:
    return Campaign.objects.get(pk=enrollment.campaign_id).status


def relay(enrollment, event: dict):
    SmtpCredential.objects.filter(pk=enrollment.credential_id).update(relay_provider="mailgun")
    credential = SmtpCredential.objects.get(pk=enrollment.credential_id)
    credential.relay_signing_key = MAILGUN_KEY
    credential.save()
    response = Client().post(
        f"/inbound/relay/{credential.pk}",
        data=mailgun_body(event),
        content_type="application/json",
    )
    assert response.status_code == 200, response.content


def unsubscribe_link(enrollment):
    url = f"/u/{tokens.token_make(purpose=tokens.UNSUBSCRIBE, enrollment_id=enrollment.pk)}"
    assert Client().post(url, {"List-Unsubscribe": "One-Click"}).status_code == 200


SIGNALS = {
    "reply": lambda e: enrollment_mark_replied(enrollment_id=e.pk),
    "unsubscribe": unsubscribe_link,
    "complaint": lambda e: relay(e, mailgun_complained(first_message(e).message_id)),
    "relay_bounce": lambda e: relay(e, mailgun_failed(f"<{first_message(e).message_id}>")),
    # A delivery status report in the mailbox ends in the same service.
    "dsn_bounce": lambda e: enrollment_mark_bounced(
        enrollment=e, reason="5.1.1 user unknown", credential=e.credential
    ),
}


@pytest.mark.parametrize("signal", SIGNALS)
def test_ending_the_last_active_enrollment_completes_the_campaign(signal):
    enrollment = sent_enrollment()
    # A finished enrollment does not keep the campaign going.
    EnrollmentFactory(campaign=enrollment.campaign, status=Enrollment.Status.COMPLETED)
    SIGNALS[signal](enrollment)
    enrollment.refresh_from_db()
    assert enrollment.status not in Enrollment.ACTIVE_STATUSES
    assert status(enrollment) == "completed"


@pytest.mark.parametrize("signal", SIGNALS)
@pytest.mark.parametrize("other", ["pending", "scheduled", "sent"])
def test_a_remaining_active_enrollment_keeps_it_active(signal, other):
    enrollment = sent_enrollment()
    EnrollmentFactory(campaign=enrollment.campaign, status=other)
    SIGNALS[signal](enrollment)
    enrollment.refresh_from_db()
    assert enrollment.status not in Enrollment.ACTIVE_STATUSES
    assert status(enrollment) == "active"


def test_a_paused_campaign_stays_paused():
    enrollment = sent_enrollment()
    Campaign.objects.filter(pk=enrollment.campaign_id).update(status="paused")
    contact_unsubscribe(contact_id=enrollment.contact_id)
    assert status(enrollment) == "paused"


def test_a_reply_that_does_not_stop_the_sequence_keeps_it_active():
    enrollment = sent_enrollment(stop_on_reply=False)
    enrollment_mark_replied(enrollment_id=enrollment.pk)
    enrollment.refresh_from_db()
    assert enrollment.status == "sent"
    assert status(enrollment) == "active"


def test_an_unsubscribe_completes_each_campaign_it_ends():
    first = sent_enrollment()
    second = sent_enrollment(contact=first.contact, account=first.campaign.account)
    third = sent_enrollment(contact=first.contact, account=first.campaign.account)
    EnrollmentFactory(campaign=third.campaign, status="scheduled")
    contact_unsubscribe(contact_id=first.contact_id)
    assert [status(e) for e in (first, second, third)] == ["completed", "completed", "active"]
