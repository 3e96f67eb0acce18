"""Follow-up rules on /campaigns: on_reply and on_complete, as saved, shown and refused
(docs/outreach.md, "Follow-up campaigns")."""

import pytest

from outreach.models.campaigns import Campaign
from tests.outreach.factories import CampaignFactory
from tests.outreach.helpers import assert_error, assert_fields

pytestmark = pytest.mark.django_db


@pytest.fixture
def meeting(account):
    return CampaignFactory(account=account, name="Meeting")


@pytest.fixture
def nurture(account):
    return CampaignFactory(account=account, name="Nurture")


def create(client, **fields):
    return client.post("/campaigns", {"name": "Launch", **fields}, format="json")


def test_a_campaign_has_no_rules_by_default(api_client):
    body = create(api_client).json()
    assert body["on_reply"] == [] and body["on_complete"] is None


def test_rules_are_saved_and_shown_with_their_defaults(api_client, meeting, nurture):
    response = create(
        api_client,
        on_reply=[
            {"label": "interested", "campaign_id": str(meeting.pk)},
            {"label": "not_now", "campaign_id": str(nurture.pk), "delay_minutes": 129600},
        ],
        on_complete={"campaign_id": str(nurture.pk), "if": "opened"},
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["on_reply"] == [
        {"label": "interested", "campaign_id": str(meeting.pk), "delay_minutes": 0},
        {"label": "not_now", "campaign_id": str(nurture.pk), "delay_minutes": 129600},
    ]
    assert body["on_complete"] == {
        "campaign_id": str(nurture.pk),
        "delay_minutes": 0,
        "if": "opened",
    }
    assert api_client.get(f"/campaigns/{body['id']}").json()["on_complete"] == body["on_complete"]
    listed = api_client.get("/campaigns").json()
    assert next(c for c in listed if c["id"] == body["id"])["on_reply"] == body["on_reply"]


def test_patch_changes_and_clears_rules(api_client, account, meeting, nurture):
    campaign = CampaignFactory(account=account)
    url = f"/campaigns/{campaign.pk}"
    rule = {"campaign_id": str(nurture.pk), "delay_minutes": 60, "if": "not_opened"}
    assert api_client.patch(url, {"on_complete": rule}, format="json").json()["on_complete"] == rule
    since = Campaign.objects.get(pk=campaign.pk).on_complete["since"]
    # Sent back as read (a client PATCHing what it read): the rule and its start stay.
    read = api_client.get(url).json()
    echo = {k: v for k, v in read.items() if k not in ("stats",)}
    assert api_client.patch(url, echo, format="json").status_code == 200
    assert Campaign.objects.get(pk=campaign.pk).on_complete["since"] == since
    response = api_client.patch(url, {"on_complete": None, "on_reply": []}, format="json")
    assert (response.json()["on_complete"], response.json()["on_reply"]) == (None, [])


def test_a_rule_naming_the_campaign_itself_is_refused(api_client, account):
    campaign = CampaignFactory(account=account)
    response = api_client.patch(
        f"/campaigns/{campaign.pk}",
        {"on_reply": [{"label": "interested", "campaign_id": str(campaign.pk)}]},
        format="json",
    )
    fields = assert_fields(response, "on_reply.0.campaign_id")
    assert "itself" in fields["on_reply.0.campaign_id"][0]
    response = api_client.patch(
        f"/campaigns/{campaign.pk}",
        {"on_complete": {"campaign_id": str(campaign.pk)}},
        format="json",
    )
    assert_fields(response, "on_complete.campaign_id")


def test_another_accounts_campaign_reads_as_none(api_client, other_account, meeting):
    theirs = CampaignFactory(account=other_account)
    missing = "00000000-0000-4000-8000-00000000abcd"
    response = create(
        api_client,
        on_reply=[
            {"label": "interested", "campaign_id": str(meeting.pk)},
            {"label": "not_now", "campaign_id": str(theirs.pk)},
            {"label": "meeting_booked", "campaign_id": missing},
        ],
    )
    fields = assert_fields(response, "on_reply.1.campaign_id", "on_reply.2.campaign_id")
    assert fields["on_reply.1.campaign_id"] == fields["on_reply.2.campaign_id"]
    assert fields["on_reply.1.campaign_id"] == ["No such campaign."]
    response = create(api_client, on_complete={"campaign_id": str(theirs.pk)})
    assert assert_fields(response, "on_complete.campaign_id") == {
        "on_complete.campaign_id": ["No such campaign."]
    }
    assert not Campaign.objects.filter(name="Launch").exists()


@pytest.mark.parametrize(
    ("rules", "fields"),
    [
        ([{"label": "keen", "campaign_id": "M"}], {"on_reply.0.label"}),
        ([{"label": "unsubscribe_request", "campaign_id": "M"}], {"on_reply.0.label"}),
        (
            [
                {"label": "interested", "campaign_id": "M"},
                {"label": "interested", "campaign_id": "N"},
            ],
            {"on_reply.1.label"},
        ),
        (
            [{"label": "interested", "campaign_id": "M", "delay_minutes": -1}],
            {"on_reply.0.delay_minutes"},
        ),
        (
            [{"label": "interested", "campaign_id": "M", "delay_minutes": 527041}],
            {"on_reply.0.delay_minutes"},
        ),
        (
            [{"label": "interested", "campaign_id": "M", "dealy_minutes": 5}],
            {"on_reply.0.dealy_minutes"},
        ),
        ([{"label": "interested"}], {"on_reply.0.campaign_id"}),
        ([{"label": "interested", "campaign_id": "not-a-uuid"}], {"on_reply.0.campaign_id"}),
        ({"label": "interested", "campaign_id": "M"}, {"on_reply.non_field_errors"}),
    ],
)
def test_bad_reply_rules_name_their_path(api_client, meeting, nurture, rules, fields):
    ids = {"M": str(meeting.pk), "N": str(nurture.pk)}

    def fill(rule):
        return {k: ids.get(v, v) if k == "campaign_id" else v for k, v in rule.items()}

    body = [fill(rule) for rule in rules] if isinstance(rules, list) else fill(rules)
    assert set(assert_fields(create(api_client, on_reply=body), *fields)) == fields


@pytest.mark.parametrize(
    ("rule", "field"),
    [
        ({"if": "replied"}, "on_complete.if"),
        ({"delay_minutes": 527041}, "on_complete.delay_minutes"),
        ({"delay_minutes": "soon"}, "on_complete.delay_minutes"),
        ({"when": "any"}, "on_complete.when"),
    ],
)
def test_bad_complete_rules_name_their_path(api_client, nurture, rule, field):
    response = create(api_client, on_complete={"campaign_id": str(nurture.pk), **rule})
    assert_fields(response, field)


def test_deleting_a_target_campaign_drops_the_rules_that_name_it(
    api_client, account, meeting, nurture
):
    campaign = CampaignFactory(account=account)
    api_client.patch(
        f"/campaigns/{campaign.pk}",
        {
            "on_reply": [
                {"label": "interested", "campaign_id": str(meeting.pk)},
                {"label": "not_now", "campaign_id": str(nurture.pk)},
            ],
            "on_complete": {"campaign_id": str(nurture.pk)},
        },
        format="json",
    )
    assert api_client.delete(f"/campaigns/{nurture.pk}").status_code == 204
    body = api_client.get(f"/campaigns/{campaign.pk}").json()
    assert body["on_reply"] == [
        {"label": "interested", "campaign_id": str(meeting.pk), "delay_minutes": 0}
    ]
    assert body["on_complete"] is None


def test_a_campaign_of_another_account_is_not_found(other_client, account):
    campaign = CampaignFactory(account=account)
    response = other_client.patch(f"/campaigns/{campaign.pk}", {"on_reply": []}, format="json")
    assert_error(response, 404, "campaign_not_found")
