"""/campaigns: CRUD, steps, credential_ids, timezone, send_window, stats, pause/resume."""

import pytest
from django.utils import timezone

from outreach.models.campaigns import Campaign, CampaignStep
from outreach.models.sending import Enrollment
from tests.outreach.factories import (
    CampaignFactory,
    CredentialFactory,
    EnrollmentFactory,
)
from tests.outreach.helpers import assert_error, assert_fields

pytestmark = pytest.mark.django_db

STEPS = [
    {"subject": "Hi {{first_name|there}}", "body_text": "About {{company}}", "delay_minutes": 0},
    {
        "subject": "",
        "body_text": "Following up, {{fields.job_title|friend}}",
        "delay_minutes": 1440,
    },
]


def create(client, **overrides):
    return client.post("/campaigns", {"name": "Launch", **overrides}, format="json")


def test_it_creates_a_draft_with_defaults(api_client):
    response = create(api_client)
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["status"] == "draft"
    assert body["paused_reason"] is None
    assert body["steps"] == []
    assert body["credential_ids"] == []
    assert body["timezone"] == "UTC"
    assert body["send_window"] is None
    assert body["bounce_threshold_percent"] == 5.0
    assert body["track_opens"] is True and body["stop_on_reply"] is True
    assert body["track_clicks"] is False
    assert body["stop_on_domain_reply"] is False and body["unsubscribe_footer"] is False
    assert body["stats"] == {
        "enrolled": 0,
        "sent": 0,
        "opened": 0,
        "clicked": 0,
        "replied": 0,
        "bounced": 0,
        "unsubscribed": 0,
        "stopped": 0,
    }


def test_it_creates_with_everything(api_client, account):
    credentials = [CredentialFactory(account=account) for _ in range(2)]
    response = create(
        api_client,
        steps=STEPS,
        credential_ids=[str(c.pk) for c in credentials],
        timezone="Europe/Paris",
        send_window={"start": "09:00", "end": "17:30", "days": [1, 2, 3, 4, 5]},
        bounce_threshold_percent=2.5,
        track_opens=False,
        stop_on_reply=False,
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert [s["subject"] for s in body["steps"]] == ["Hi {{first_name|there}}", ""]
    assert body["steps"][1] == {
        "key": "step_2",
        "subject": "",
        "body_text": "Following up, {{fields.job_title|friend}}",
        "body_html": None,
        "delay_minutes": 1440,
        "variants": [],
        "next": "end",
    }
    assert sorted(body["credential_ids"]) == sorted(str(c.pk) for c in credentials)
    assert body["timezone"] == "Europe/Paris"
    assert body["send_window"] == {"start": "09:00", "end": "17:30", "days": [1, 2, 3, 4, 5]}
    assert body["bounce_threshold_percent"] == 2.5
    assert body["track_opens"] is False and body["stop_on_reply"] is False
    assert list(
        CampaignStep.objects.filter(campaign_id=body["id"]).values_list("position", flat=True)
    ) == [1, 2]


@pytest.mark.parametrize(
    ("overrides", "fields"),
    [
        ({"name": ""}, {"name"}),
        ({"timezone": "Mars/Olympus"}, {"timezone"}),
        ({"send_window": {"start": "17:00", "end": "09:00", "days": [1]}}, {"send_window.end"}),
        ({"send_window": {"start": "09:00", "end": "17:00", "days": [9]}}, {"send_window.days"}),
        ({"bounce_threshold_percent": 101}, {"bounce_threshold_percent"}),
        ({"steps": [{"subject": "Hi", "body_text": "Yo {{nickname}}"}]}, {"steps.0.body_text"}),
        (
            {"steps": [STEPS[0], {"subject": "{{first_name", "body_text": "x"}]},
            {"steps.1.subject"},
        ),
        (
            {"steps": [STEPS[0], {"body_text": "x", "body_html": "<b>{{fields.}}</b>"}]},
            {"steps.1.body_html"},
        ),
        ({"steps": [{"subject": "", "body_text": "x"}]}, {"steps.0.subject"}),
        ({"steps": [{"subject": "Hi"}]}, {"steps.0.body_text"}),
        (
            {"steps": [{"subject": "Hi", "body_text": "x", "delay_minutes": -5}]},
            {"steps.0.delay_minutes"},
        ),
        ({"credential_ids": ["not-a-uuid"]}, {"credential_ids.0"}),
    ],
)
def test_invalid_campaigns_are_validation_failed(api_client, overrides, fields):
    assert_fields(create(api_client, **overrides), *fields)


def test_unknown_variable_message_names_it(api_client):
    response = create(api_client, steps=[{"subject": "Hi {{nickname}}", "body_text": "x"}])
    fields = assert_fields(response, "steps.0.subject")
    assert "{{nickname}}" in fields["steps.0.subject"][0]


def test_foreign_credential_ids_are_validation_failed(api_client, other_account, account):
    mine = CredentialFactory(account=account)
    foreign = CredentialFactory(account=other_account)
    response = create(api_client, credential_ids=[str(mine.pk), str(foreign.pk)])
    fields = assert_fields(response, "credential_ids.1")
    assert fields["credential_ids.1"] == ["No such SMTP credential."]
    assert not Campaign.objects.exists()


def test_patch_replaces_steps_in_place(api_client, account):
    campaign = CampaignFactory(account=account, with_steps=3)
    first_step_id = campaign.steps.get(position=1).pk
    response = api_client.patch(
        f"/campaigns/{campaign.pk}",
        {"steps": [{"subject": "New {{first_name}}", "body_text": "New body", "delay_minutes": 5}]},
        format="json",
    )
    assert response.status_code == 200, response.content
    assert [s["subject"] for s in response.json()["steps"]] == ["New {{first_name}}"]
    assert list(campaign.steps.values_list("pk", flat=True)) == [first_step_id]


def test_patch_other_fields_leaves_steps_and_credentials(api_client, account):
    campaign = CampaignFactory(account=account, with_steps=2)
    response = api_client.patch(
        f"/campaigns/{campaign.pk}", {"name": "Renamed", "track_opens": False}, format="json"
    )
    body = response.json()
    assert body["name"] == "Renamed" and body["track_opens"] is False
    assert len(body["steps"]) == 2 and len(body["credential_ids"]) == 1
    assert body["stop_on_reply"] is True  # a PATCH applies no defaults


def test_status_is_read_only(api_client, account):
    campaign = CampaignFactory(account=account)
    response = api_client.patch(f"/campaigns/{campaign.pk}", {"status": "active"}, format="json")
    assert response.status_code == 422  # changed: refused (config.api.serializers)
    assert response.json()["details"]["fields"] == {
        "status": ["Read-only field: it cannot be changed."]
    }
    body = api_client.patch(f"/campaigns/{campaign.pk}", {"status": "draft"}, format="json").json()
    assert body["status"] == "draft"  # sent back unchanged: accepted


def test_active_campaign_cannot_lose_all_steps(api_client, account):
    campaign = CampaignFactory(account=account, status=Campaign.Status.ACTIVE)
    assert_fields(
        api_client.patch(f"/campaigns/{campaign.pk}", {"steps": []}, format="json"), "steps"
    )
    draft = CampaignFactory(account=account)
    response = api_client.patch(f"/campaigns/{draft.pk}", {"steps": []}, format="json")
    assert response.status_code == 200 and response.json()["steps"] == []


def test_active_campaign_steps_and_settings_can_change(api_client, account):
    campaign = CampaignFactory(account=account, status=Campaign.Status.ACTIVE, with_steps=1)
    response = api_client.patch(
        f"/campaigns/{campaign.pk}",
        {
            "steps": [STEPS[0], STEPS[1]],
            "timezone": "Asia/Tokyo",
            "credential_ids": [],
        },
        format="json",
    )
    assert response.status_code == 200
    assert len(response.json()["steps"]) == 2
    assert response.json()["credential_ids"] == []


def test_stats_count_enrollments(api_client, account):
    campaign = CampaignFactory(account=account)
    now = timezone.now()
    EnrollmentFactory(campaign=campaign)
    EnrollmentFactory(campaign=campaign, status="sent", sent_at=now, opened_at=now)
    EnrollmentFactory(campaign=campaign, status="replied", sent_at=now, replied_at=now)
    EnrollmentFactory(campaign=campaign, status="bounced", sent_at=now, bounced_at=now)
    EnrollmentFactory(campaign=campaign, status="unsubscribed", sent_at=now, unsubscribed_at=now)
    EnrollmentFactory(campaign=campaign, status="stopped", stopped_at=now, stop_reason="manual")
    expected = {
        "enrolled": 6,
        "sent": 4,
        "opened": 1,
        "clicked": 0,
        "replied": 1,
        "bounced": 1,
        "unsubscribed": 1,
        "stopped": 1,
    }
    assert api_client.get(f"/campaigns/{campaign.pk}").json()["stats"] == expected
    listed = api_client.get("/campaigns").json()
    assert listed[0]["stats"] == expected


@pytest.mark.parametrize("count", [3, 30])
def test_list_query_count_is_bounded(
    api_client, account, count, django_assert_max_num_queries, auth_queries
):
    for _ in range(count):
        campaign = CampaignFactory(account=account, with_steps=2)
        EnrollmentFactory(campaign=campaign)
    # auth (2) + page + steps + credentials + stats
    with django_assert_max_num_queries(auth_queries + 5):
        response = api_client.get("/campaigns?limit=1000")
    assert len(response.json()) == count


def test_list_is_paginated_newest_first(api_client, account):
    campaigns = [CampaignFactory(account=account) for _ in range(3)]
    first = api_client.get("/campaigns?limit=2")
    assert [c["id"] for c in first.json()] == [str(c.pk) for c in campaigns[::-1][:2]]
    assert 'rel="next"' in first["Link"]
    second = api_client.get(f"/campaigns?limit=2&starting_after={first.json()[-1]['id']}")
    assert [c["id"] for c in second.json()] == [str(campaigns[0].pk)]
    assert "Link" not in second


def test_delete_removes_campaign_and_enrollments(api_client, account):
    campaign = CampaignFactory(account=account)
    enrollment = EnrollmentFactory(campaign=campaign)
    response = api_client.delete(f"/campaigns/{campaign.pk}")
    assert response.status_code == 204 and response.content == b""
    assert not Enrollment.objects.filter(pk=enrollment.pk).exists()
    assert_error(api_client.get(f"/campaigns/{campaign.pk}"), 404, "campaign_not_found")


# --- pause / resume --------------------------------------------------------------------


def test_pause_and_resume(api_client, account):
    campaign = CampaignFactory(account=account, status=Campaign.Status.ACTIVE)
    paused = api_client.post(f"/campaigns/{campaign.pk}/pause")
    assert paused.status_code == 200
    assert paused.json()["status"] == "paused" and paused.json()["paused_reason"] == "manual"
    again = api_client.post(f"/campaigns/{campaign.pk}/pause")
    assert again.status_code == 200 and again.json()["status"] == "paused"
    resumed = api_client.post(f"/campaigns/{campaign.pk}/resume")
    assert resumed.status_code == 200
    assert resumed.json()["status"] == "active" and resumed.json()["paused_reason"] is None
    assert api_client.post(f"/campaigns/{campaign.pk}/resume").json()["status"] == "active"


@pytest.mark.parametrize("state", ["draft", "completed"])
def test_pause_and_resume_need_active_or_paused(api_client, account, state):
    campaign = CampaignFactory(account=account, status=state)
    assert_fields(api_client.post(f"/campaigns/{campaign.pk}/pause"), "status")
    assert_fields(api_client.post(f"/campaigns/{campaign.pk}/resume"), "status")


def test_resume_after_all_credentials_disabled_needs_an_enabled_one(api_client, account):
    campaign = CampaignFactory(
        account=account,
        status=Campaign.Status.PAUSED,
        paused_reason=Campaign.PausedReason.ALL_CREDENTIALS_DISABLED,
        with_credential=False,
    )
    credential = CredentialFactory(
        account=account, disabled_at=timezone.now(), disabled_reason="bounce_rate_exceeded"
    )
    campaign.credentials.add(credential)
    body = assert_error(
        api_client.post(f"/campaigns/{campaign.pk}/resume"), 409, "campaign_not_dispatchable"
    )
    assert body["details"] == {"reasons": ["no_enabled_credential"]}
    campaign.refresh_from_db()
    assert campaign.status == "paused"
    api_client.patch(f"/smtp_credentials/{credential.pk}", {"disabled_at": None}, format="json")
    resumed = api_client.post(f"/campaigns/{campaign.pk}/resume")
    assert resumed.status_code == 200 and resumed.json()["status"] == "active"


def test_idempotency_key_is_accepted_on_create(api_client):
    response = api_client.post(
        "/campaigns", {"name": "Once"}, format="json", HTTP_IDEMPOTENCY_KEY="abc-123"
    )
    assert response.status_code == 201
