"""Sequences that react through the SDK, against the live service: a branching campaign
built with outreach_sdk.sequences, read back in words, an invalid graph refused with
its path, an edit previewed and then made, enrollments' current_key and path."""

import pytest
from outreach_sdk import Client, errors
from outreach_sdk.sequences import branch, describe, duration_words, email

from outreach.models.campaigns import Campaign
from outreach.models.sending import Enrollment
from tests.outreach.factories import EnrollmentFactory

pytestmark = [pytest.mark.e2e]

STEPS = [
    email("intro", subject="Quick question", body_text="Hi {{first_name|there}}."),
    branch(
        "opened_intro",
        on="opened",
        of="intro",
        within_minutes=3 * 24 * 60,
        then="pricing",
        otherwise="bump",
    ),
    email("pricing", body_text="Our pricing.", delay_minutes=60, next="end"),
    email("bump", body_text="Bumping this up.", delay_minutes=24 * 60),
]


def test_a_branching_campaign_is_built_described_and_edited(service_url, sdk_key):
    client = Client(api_key=sdk_key, base_url=service_url)
    campaign = client.campaigns.create(name="Reacting", steps=STEPS)
    assert [s["key"] for s in campaign.steps] == ["intro", "opened_intro", "pricing", "bump"]
    assert campaign.steps[1]["else"] == "bump" and campaign.steps[0]["next"] == "opened_intro"
    assert campaign.steps_in_words == [
        'Start: send intro ("Quick question") at dispatch; then wait at opened_intro.',
        "After intro, wait up to 3 days (opened_intro): if they open intro, send pricing "
        "(1 hour later); otherwise send bump (1 day later).",
        "pricing (a reply in the thread): then stop (the sequence ends).",
        "bump (a reply in the thread): then stop (the sequence ends).",
    ]

    with pytest.raises(errors.ValidationFailed) as refused:
        client.campaigns.create(
            name="Bad", steps=[STEPS[0], {**STEPS[1], "then": "nowhere", "else": "end"}]
        )
    assert set(refused.value.details["fields"]) == {"steps.1.then"}

    waiting = EnrollmentFactory(
        campaign=Campaign.objects.get(pk=campaign.id),
        status="sent",
        current_key="opened_intro",
        path=["intro"],
        current_step=1,
    )
    edit = [{**STEPS[0], "next": "bump"}, STEPS[3]]
    preview = client.campaigns.steps_preview(campaign.id, edit)
    assert preview.moves == [{"from_key": "opened_intro", "to_key": "bump", "enrollments": 1}]
    assert preview.moved == 1
    updated = client.campaigns.update(campaign.id, steps=edit)
    assert [s["key"] for s in updated.steps] == ["intro", "bump"]
    waiting.refresh_from_db()
    assert waiting.current_key == "bump"

    [enrollment] = client.campaigns.enrollments(campaign.id)
    assert (enrollment.current_key, enrollment.path) == ("bump", ["intro"])
    assert Enrollment.objects.get(pk=enrollment.id).status == "sent"


def test_on_reply_and_on_complete_pass_through(service_url, sdk_key):
    """The SDK sends them as given and reads them back; the service decides."""
    client = Client(api_key=sdk_key, base_url=service_url)
    campaign = client.campaigns.create(name="Plain", steps=[STEPS[0]])
    assert (campaign.on_reply, campaign.on_complete) == (
        campaign.raw.get("on_reply", []),
        campaign.raw.get("on_complete"),
    )


def test_the_words_of_a_straight_line_and_of_durations():
    steps = [
        {"key": "step_1", "subject": "Hello", "delay_minutes": 0, "next": "step_2"},
        {"key": "step_2", "subject": "", "delay_minutes": 2880, "next": "end"},
    ]
    assert describe(steps) == [
        'Start: send step_1 ("Hello") at dispatch; then send step_2 (2 days later).',
        "step_2 (a reply in the thread): then stop (the sequence ends).",
    ]
    assert [duration_words(m) for m in (1, 90, 120, 1440)] == [
        "1 minute",
        "90 minutes",
        "2 hours",
        "1 day",
    ]
    assert branch("b", on="clicked", within_minutes=5, then="end", otherwise="end", of="any") == {
        "key": "b",
        "branch": {"on": "clicked", "within_minutes": 5, "of": "any"},
        "then": "end",
        "else": "end",
    }
