"""Dispatch, outreaches and the enrollments list."""

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from billing.usage import usage_record_current
from outreach.models.campaigns import Campaign, CampaignStep
from outreach.models.contacts import Contact
from outreach.models.sending import Enrollment
from tests.outreach.factories import (
    CampaignFactory,
    ContactFactory,
    CredentialFactory,
    EnrollmentFactory,
)
from tests.outreach.helpers import assert_error, assert_fields
from tests.support.usage import usage_set

pytestmark = pytest.mark.django_db


def pending(campaign, count, **contact_kwargs):
    return [
        EnrollmentFactory(
            campaign=campaign,
            contact=ContactFactory(account=campaign.account, **contact_kwargs),
        )
        for _ in range(count)
    ]


def reach_limit(account):
    record = usage_record_current(account=account)
    usage_set(record, account.plan.monthly_limit)


# --- dispatch --------------------------------------------------------------------------


def test_dispatch_all_pending_schedules_step_one(api_client, account):
    campaign = CampaignFactory(account=account)
    CampaignStep.objects.filter(campaign=campaign).update(delay_minutes=30)
    enrollments = pending(campaign, 3)
    before = timezone.now()
    response = api_client.post(
        f"/campaigns/{campaign.pk}/dispatch", {"all_pending": True}, format="json"
    )
    assert response.status_code == 200, response.content
    assert response.json() == {"campaign_id": str(campaign.pk), "dispatched": 3}
    for enrollment in enrollments:
        enrollment.refresh_from_db()
        assert enrollment.status == "scheduled"
        assert before + timedelta(minutes=30) <= enrollment.next_send_at
        assert enrollment.next_send_at <= timezone.now() + timedelta(minutes=30)
        assert enrollment.dispatched_at is not None
    campaign.refresh_from_db()
    assert campaign.status == "active"


def test_dispatch_respects_the_send_window(api_client, account):
    campaign = CampaignFactory(
        account=account,
        timezone="America/New_York",
        # A window that is never open now: one minute, on a day that is not today.
        send_window={
            "start": "03:00",
            "end": "03:01",
            "days": [((timezone.now().astimezone(UTC).isoweekday() + 2) % 7) + 1],
        },
    )
    [enrollment] = pending(campaign, 1)
    api_client.post(f"/campaigns/{campaign.pk}/dispatch", {"all_pending": True}, format="json")
    enrollment.refresh_from_db()
    local = enrollment.next_send_at.astimezone(__import__("zoneinfo").ZoneInfo("America/New_York"))
    assert (local.hour, local.minute) == (3, 0)
    assert local.isoweekday() in campaign.send_window["days"]
    assert enrollment.next_send_at > timezone.now()


def test_dispatch_named_contacts_only(api_client, account):
    campaign = CampaignFactory(account=account)
    first, second, third = pending(campaign, 3)
    response = api_client.post(
        f"/campaigns/{campaign.pk}/dispatch",
        {"contact_ids": [str(first.contact_id), str(third.contact_id)]},
        format="json",
    )
    assert response.json()["dispatched"] == 2
    assert set(Enrollment.objects.filter(status="scheduled").values_list("pk", flat=True)) == {
        first.pk,
        third.pk,
    }
    second.refresh_from_db()
    assert second.status == "pending"


def test_dispatch_twice_does_nothing_more(api_client, account):
    campaign = CampaignFactory(account=account)
    pending(campaign, 2)
    url = f"/campaigns/{campaign.pk}/dispatch"
    assert api_client.post(url, {"all_pending": True}, format="json").json()["dispatched"] == 2
    assert api_client.post(url, {"all_pending": True}, format="json").json()["dispatched"] == 0


def test_dispatch_skips_suppressed_contacts(api_client, account):
    campaign = CampaignFactory(account=account)
    pending(campaign, 1)
    [unsub] = pending(campaign, 1, unsubscribed_at=timezone.now())
    [bounced] = pending(campaign, 1, bounced_at=timezone.now())
    response = api_client.post(
        f"/campaigns/{campaign.pk}/dispatch", {"all_pending": True}, format="json"
    )
    assert response.json()["dispatched"] == 1
    for enrollment in (unsub, bounced):
        enrollment.refresh_from_db()
        assert enrollment.status == "pending" and enrollment.next_send_at is None


def test_dispatch_a_contact_with_no_pending_enrollment_counts_zero(api_client, account):
    campaign = CampaignFactory(account=account)
    outsider = ContactFactory(account=account)
    response = api_client.post(
        f"/campaigns/{campaign.pk}/dispatch", {"contact_ids": [str(outsider.pk)]}, format="json"
    )
    assert response.json()["dispatched"] == 0


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ({}, {"contact_ids"}),
        ({"all_pending": False}, {"contact_ids"}),
        ({"all_pending": True, "contact_ids": []}, {"all_pending"}),
        ({"contact_ids": ["nope"]}, {"contact_ids.0"}),
    ],
)
def test_dispatch_body_validation(api_client, account, body, fields):
    campaign = CampaignFactory(account=account)
    assert_fields(
        api_client.post(f"/campaigns/{campaign.pk}/dispatch", body, format="json"), *fields
    )


def test_dispatch_foreign_contact_ids_are_validation_failed(api_client, account, other_account):
    campaign = CampaignFactory(account=account)
    [mine] = pending(campaign, 1)
    foreign = ContactFactory(account=other_account)
    response = api_client.post(
        f"/campaigns/{campaign.pk}/dispatch",
        {"contact_ids": [str(mine.contact_id), str(foreign.pk)]},
        format="json",
    )
    assert assert_fields(response, "contact_ids.1")["contact_ids.1"] == ["No such contact."]
    mine.refresh_from_db()
    assert mine.status == "pending"


@pytest.mark.parametrize(
    ("steps", "credential", "reasons"),
    [
        (0, "enabled", ["no_steps"]),
        (1, None, ["no_enabled_credential"]),
        (1, "disabled", ["no_enabled_credential"]),
        (0, None, ["no_steps", "no_enabled_credential"]),
    ],
)
def test_dispatch_not_dispatchable(api_client, account, steps, credential, reasons):
    campaign = CampaignFactory(account=account, with_steps=steps, with_credential=False)
    if credential:
        campaign.credentials.add(
            CredentialFactory(
                account=account,
                disabled_at=timezone.now() if credential == "disabled" else None,
            )
        )
    [enrollment] = pending(campaign, 1)
    body = assert_error(
        api_client.post(f"/campaigns/{campaign.pk}/dispatch", {"all_pending": True}, format="json"),
        409,
        "campaign_not_dispatchable",
    )
    assert body["details"] == {"reasons": reasons}
    enrollment.refresh_from_db()
    campaign.refresh_from_db()
    assert enrollment.status == "pending" and campaign.status == "draft"


def test_dispatch_at_the_plan_limit_is_402(api_client, account):
    campaign = CampaignFactory(account=account)
    [enrollment] = pending(campaign, 1)
    reach_limit(account)
    body = assert_error(
        api_client.post(f"/campaigns/{campaign.pk}/dispatch", {"all_pending": True}, format="json"),
        402,
        "plan_limit_reached",
    )
    assert body["details"] == {"current_period_sends": 100, "monthly_limit": 100}
    enrollment.refresh_from_db()
    assert enrollment.status == "pending"


def test_dispatch_keeps_a_paused_campaign_paused(api_client, account):
    campaign = CampaignFactory(account=account, status="paused", paused_reason="manual")
    pending(campaign, 1)
    response = api_client.post(
        f"/campaigns/{campaign.pk}/dispatch", {"all_pending": True}, format="json"
    )
    assert response.json()["dispatched"] == 1
    campaign.refresh_from_db()
    assert campaign.status == "paused"


def test_dispatch_reactivates_a_completed_campaign(api_client, account):
    campaign = CampaignFactory(account=account, status="completed")
    pending(campaign, 1)
    api_client.post(f"/campaigns/{campaign.pk}/dispatch", {"all_pending": True}, format="json")
    campaign.refresh_from_db()
    assert campaign.status == "active"


# --- outreaches ------------------------------------------------------------------------


def outreach(client, campaign, **contact):
    return client.post(
        "/outreaches",
        {"campaign_id": str(campaign.pk), "contact": {"email": "new@example.org", **contact}},
        format="json",
    )


def test_outreach_upserts_enrolls_and_dispatches(api_client, account):
    campaign = CampaignFactory(account=account)
    response = outreach(api_client, campaign, first_name="Nia", fields={"team": "ops"})
    assert response.status_code == 201, response.content
    body = response.json()
    contact = Contact.objects.get(account=account, email_lower="new@example.org")
    assert body["campaign_id"] == str(campaign.pk)
    assert body["contact_id"] == str(contact.pk)
    assert body["contact_email"] == "new@example.org"
    assert body["status"] == "scheduled"
    assert body["current_step"] == 0
    assert body["next_send_at"] is not None
    for name in ("sent_at", "opened_at", "replied_at", "bounce_reason", "unsubscribed_at"):
        assert body[name] is None
    assert contact.first_name == "Nia" and contact.fields == {"team": "ops"}
    campaign.refresh_from_db()
    assert campaign.status == "active"


def test_outreach_merges_into_an_existing_contact(api_client, account):
    campaign = CampaignFactory(account=account)
    existing = ContactFactory(
        account=account, email="new@example.org", first_name="Old", fields={"a": "1"}
    )
    response = outreach(api_client, campaign, email="NEW@example.org", company="NewCo")
    assert response.json()["contact_id"] == str(existing.pk)
    existing.refresh_from_db()
    assert (existing.first_name, existing.company, existing.fields) == ("Old", "NewCo", {"a": "1"})


def test_outreach_dispatches_an_existing_pending_enrollment(api_client, account):
    campaign = CampaignFactory(account=account)
    [enrollment] = pending(campaign, 1)
    response = outreach(api_client, campaign, email=enrollment.contact.email)
    assert response.status_code == 201
    assert response.json()["id"] == str(enrollment.pk)
    assert response.json()["status"] == "scheduled"


def test_outreach_again_is_a_no_op_200(api_client, account):
    campaign = CampaignFactory(account=account)
    first = outreach(api_client, campaign).json()
    second = outreach(api_client, campaign)
    assert second.status_code == 200
    assert second.json() == first
    assert Enrollment.objects.count() == 1


def test_outreach_refuses_suppressed_contacts(api_client, account):
    campaign = CampaignFactory(account=account)
    ContactFactory(account=account, email="new@example.org", unsubscribed_at=timezone.now())
    fields = assert_fields(outreach(api_client, campaign), "contact.email")
    assert "unsubscribed" in fields["contact.email"][0]
    assert not Enrollment.objects.exists()


def test_outreach_402_and_409_write_nothing(api_client, account):
    blocked = CampaignFactory(account=account, with_steps=0)
    assert_error(outreach(api_client, blocked), 409, "campaign_not_dispatchable")
    campaign = CampaignFactory(account=account)
    reach_limit(account)
    assert_error(outreach(api_client, campaign), 402, "plan_limit_reached")
    assert not Contact.objects.exists() and not Enrollment.objects.exists()


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ({}, {"campaign_id", "contact"}),
        ({"campaign_id": "nope", "contact": {"email": "a@b.example"}}, {"campaign_id"}),
        ({"campaign_id": None, "contact": {}}, {"campaign_id", "contact.email"}),
        ({"contact": {"email": "bad"}}, {"campaign_id", "contact.email"}),
        (
            {"contact": {"email": "a@b.example", "fields": {"x": 1}}},
            {"campaign_id", "contact.fields"},
        ),
    ],
)
def test_outreach_validation(api_client, body, fields):
    assert_fields(api_client.post("/outreaches", body, format="json"), *fields)


def test_outreach_foreign_campaign_is_validation_failed(api_client, other_account):
    foreign = CampaignFactory(account=other_account)
    fields = assert_fields(outreach(api_client, foreign), "campaign_id")
    assert fields["campaign_id"] == ["No such campaign."]
    assert not Contact.objects.exists()


# --- enrollments list ------------------------------------------------------------------


def test_enrollments_list_and_status_filter(api_client, account):
    campaign = CampaignFactory(account=account)
    pending(campaign, 2)
    sent = EnrollmentFactory(
        campaign=campaign, status="sent", current_step=1, sent_at=datetime(2026, 1, 1, tzinfo=UTC)
    )
    response = api_client.get(f"/campaigns/{campaign.pk}/enrollments")
    assert response.status_code == 200
    assert len(response.json()) == 3
    filtered = api_client.get(f"/campaigns/{campaign.pk}/enrollments?status=sent").json()
    assert [e["id"] for e in filtered] == [str(sent.pk)]
    assert filtered[0]["sent_at"] == "2026-01-01T00:00:00.000000Z"
    assert filtered[0]["contact_email"] == sent.contact.email
    assert_fields(api_client.get(f"/campaigns/{campaign.pk}/enrollments?status=nope"), "status")


@pytest.mark.parametrize("count", [3, 40])
def test_enrollments_list_query_count_is_bounded(
    api_client, account, count, django_assert_max_num_queries, auth_queries
):
    campaign = CampaignFactory(account=account)
    pending(campaign, count)
    with django_assert_max_num_queries(auth_queries + 2):
        response = api_client.get(f"/campaigns/{campaign.pk}/enrollments?limit=1000")
    assert len(response.json()) == count


def test_enrollments_pagination(api_client, account):
    campaign = CampaignFactory(account=account)
    enrollments = pending(campaign, 3)
    page = api_client.get(f"/campaigns/{campaign.pk}/enrollments?limit=2")
    assert [e["id"] for e in page.json()] == [str(e.pk) for e in enrollments[::-1][:2]]
    assert 'rel="next"' in page["Link"]
    other = CampaignFactory(account=account)
    [stranger] = pending(other, 1)
    assert_fields(
        api_client.get(f"/campaigns/{campaign.pk}/enrollments?starting_after={stranger.pk}"),
        "starting_after",
    )


def test_campaign_status_choices_cover_api():
    assert set(Campaign.Status.values) == {"draft", "active", "paused", "completed"}
    assert set(Enrollment.Status.values) == {
        "pending",
        "scheduled",
        "sent",
        "completed",
        "replied",
        "bounced",
        "unsubscribed",
        "failed",
        "stopped",
    }


# --- the scheduler's fast path -------------------------------------------------------


@pytest.mark.parametrize(("delay_minutes", "rung"), [(0, 1), (30, 0)])
def test_a_dispatch_due_at_once_runs_the_scheduler_after_its_commit(
    api_client,
    account,
    settings,
    monkeypatch,
    django_capture_on_commit_callbacks,
    delay_minutes,
    rung,
):
    from outreach.sending.beat import schedule_sends

    settings.SENDING_SCHEDULE_ON_DISPATCH = True
    calls = []
    monkeypatch.setattr(schedule_sends, "apply_async", lambda *a, **kw: calls.append(kw))
    campaign = CampaignFactory(account=account)
    CampaignStep.objects.filter(campaign=campaign).update(delay_minutes=delay_minutes)
    pending(campaign, 2)
    with django_capture_on_commit_callbacks(execute=True):
        response = api_client.post(
            f"/campaigns/{campaign.pk}/dispatch", {"all_pending": True}, format="json"
        )
    assert response.json()["dispatched"] == 2
    assert len(calls) == rung  # a first step 30 minutes away waits for its tick


def test_a_broker_that_refuses_the_ring_does_not_fail_the_dispatch(
    api_client, account, settings, monkeypatch, django_capture_on_commit_callbacks
):
    from outreach.sending.beat import schedule_sends

    def refuse(*args, **kwargs):
        raise ConnectionRefusedError("broker down")

    settings.SENDING_SCHEDULE_ON_DISPATCH = True
    monkeypatch.setattr(schedule_sends, "apply_async", refuse)
    campaign = CampaignFactory(account=account)
    pending(campaign, 1)
    with django_capture_on_commit_callbacks(execute=True):
        response = api_client.post(
            f"/campaigns/{campaign.pk}/dispatch", {"all_pending": True}, format="json"
        )
    assert response.status_code == 200
    assert Enrollment.objects.get().status == "scheduled"  # the tick sends it later
