"""The SDK's follow-up campaigns against the live service: on_reply and on_complete set,
read back typed and refused with their path; a labelled reply's rule_outcomes typed."""

import pytest
from outreach_sdk import Client, errors

from tests.conversations.reply_rows import reply_for
from tests.intake.factories import sent_enrollment

pytestmark = [pytest.mark.e2e]


@pytest.fixture
def client(service_url, sdk_key) -> Client:
    return Client(api_key=sdk_key, base_url=service_url)


def test_rules_are_set_typed_and_refused_with_their_path(client):
    nurture = client.campaigns.create(name="Nurture")
    campaign = client.campaigns.create(
        name="Launch",
        on_reply=[{"label": "not_now", "campaign_id": nurture.id, "delay_minutes": 60}],
        on_complete={"campaign_id": nurture.id, "if": "not_opened"},
    )
    assert campaign.on_reply == [
        {"label": "not_now", "campaign_id": nurture.id, "delay_minutes": 60}
    ]
    assert campaign.on_complete == {
        "campaign_id": nurture.id,
        "delay_minutes": 0,
        "if": "not_opened",
    }
    assert client.campaigns.update(campaign.id, on_complete=None).on_complete is None
    with pytest.raises(errors.ValidationFailed) as raised:
        client.campaigns.update(
            campaign.id, on_reply=[{"label": "interested", "campaign_id": campaign.id}]
        )
    assert list(raised.value.details["fields"]) == ["on_reply.0.campaign_id"]


def test_a_labelled_reply_shows_what_its_rule_did(client, sdk_account):
    enrollment = sent_enrollment(account=sdk_account)
    meeting = client.campaigns.create(name="Meeting")
    client.campaigns.update(
        enrollment.campaign_id, on_reply=[{"label": "interested", "campaign_id": meeting.id}]
    )
    reply = client.replies.update(str(reply_for(enrollment).pk), label="interested")
    assert reply.rule_outcomes == [
        {"label": "interested", "campaign_id": meeting.id, "outcome": "pending_draft"}
    ]
    assert client.replies.retrieve(reply.id).rule_outcomes == reply.rule_outcomes
