"""POST /campaigns/:id/dispatch/preview: what POST /campaigns/:id/dispatch with the same
body would do, read with the dispatch's own rules (its first send time per contact, its
checks) and written nowhere."""

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts.models import AuditEvent
from outreach.blocklist.services import blocklist_add
from outreach.models.sending import Enrollment
from tests.outreach.factories import CampaignFactory, ContactFactory, EnrollmentFactory
from tests.outreach.helpers import assert_error, assert_fields
from tests.outreach.test_dispatch import pending, reach_limit

pytestmark = pytest.mark.django_db


def _preview(client, campaign, body=None):
    body = {"all_pending": True} if body is None else body
    return client.post(f"/campaigns/{campaign.pk}/dispatch/preview", body, format="json")


def _closed_window() -> dict:
    """09:00-10:00 on one day that is not today nor tomorrow: closed now in any zone."""
    return {"start": "09:00", "end": "10:00", "days": [(timezone.now().isoweekday() + 2) % 7 + 1]}


def test_each_contacts_first_send_time_is_the_one_the_dispatch_gives(api_client, account):
    campaign = CampaignFactory(
        account=account,
        timezone="UTC",
        send_window=_closed_window(),
        send_in_contact_timezone=True,
    )
    tokyo = EnrollmentFactory(
        campaign=campaign,
        contact=ContactFactory(account=account, email="a@example.org", timezone="Asia/Tokyo"),
    )
    york = EnrollmentFactory(
        campaign=campaign,
        contact=ContactFactory(account=account, email="b@example.org", timezone="America/New_York"),
    )
    plain = EnrollmentFactory(
        campaign=campaign, contact=ContactFactory(account=account, email="c@example.org")
    )

    answer = _preview(api_client, campaign)

    assert answer.status_code == 200, answer.content
    data = answer.json()
    assert Enrollment.objects.filter(status="pending").count() == 3  # nothing written
    campaign.refresh_from_db()
    assert campaign.status == "draft" and not AuditEvent.objects.exists()
    shown = {c["contact_id"]: c["first_send_at"] for c in data["contacts"]}
    assert [c["email"] for c in data["contacts"]] == [
        "a@example.org",
        "b@example.org",
        "c@example.org",
    ]
    assert (data["dispatched"], data["has_more"], data["refusal"]) == (3, False, None)

    dispatched = api_client.post(
        f"/campaigns/{campaign.pk}/dispatch", {"all_pending": True}, format="json"
    )
    assert dispatched.json()["dispatched"] == data["dispatched"]
    for enrollment in (tokyo, york, plain):
        enrollment.refresh_from_db()
        assert datetime.fromisoformat(shown[str(enrollment.contact_id)]) == enrollment.next_send_at
    local = tokyo.next_send_at.astimezone(ZoneInfo("Asia/Tokyo"))
    assert (local.hour, local.minute) == (9, 0)
    assert data["first_send_at"] == min(shown.values())
    assert data["campaign_timezone_first_send_at"] == shown[str(plain.contact_id)]
    assert sorted((t["timezone"], t["contacts"]) for t in data["send_times"]) == [
        ("", 1),
        ("America/New_York", 1),
        ("Asia/Tokyo", 1),
    ]


def test_blocked_suppressed_and_not_pending_contacts_are_told_apart(api_client, account):
    campaign = CampaignFactory(account=account)
    [kept] = pending(campaign, 1)
    blocked = EnrollmentFactory(
        campaign=campaign, contact=ContactFactory(account=account, email="x@blocked.example")
    )
    blocklist_add(account=account, values=["blocked.example"])
    [suppressed] = pending(campaign, 1, unsubscribed_at=timezone.now())
    done = EnrollmentFactory(campaign=campaign, status="sent")
    ids = [str(e.contact_id) for e in (kept, blocked, suppressed, done)]

    data = _preview(api_client, campaign, {"contact_ids": ids}).json()

    assert data["dispatched"] == 1
    assert [c["contact_id"] for c in data["contacts"]] == [str(kept.contact_id)]
    assert data["blocked"] == [
        {"contact_id": str(blocked.contact_id), "email": "x@blocked.example"}
    ]
    assert sorted(data["not_pending"]) == sorted([str(suppressed.contact_id), str(done.contact_id)])
    blocked.refresh_from_db()
    assert blocked.status == "pending"  # the dispatch would stop it; the preview does not


def test_the_dispatchs_refusals_are_shown_not_raised(api_client, account):
    campaign = CampaignFactory(account=account, with_steps=0)
    pending(campaign, 1)
    data = _preview(api_client, campaign).json()
    assert data["refusal"]["status"] == 409
    assert data["refusal"]["code"] == "campaign_not_dispatchable"
    assert data["refusal"]["details"] == {"reasons": ["no_steps"]}
    assert data["dispatched"] == 1 and data["contacts"][0]["first_send_at"] is None

    limited = CampaignFactory(account=account)
    pending(limited, 1)
    reach_limit(account)
    refusal = _preview(api_client, limited).json()["refusal"]
    assert (refusal["status"], refusal["code"]) == (402, "plan_limit_reached")


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ({}, {"contact_ids"}),
        ({"all_pending": True, "contact_ids": []}, {"all_pending"}),
        ({"contact_ids": ["nope"]}, {"contact_ids.0"}),
    ],
)
def test_bad_bodies_are_the_dispatchs_422(api_client, account, body, fields):
    campaign = CampaignFactory(account=account)
    assert_fields(_preview(api_client, campaign, body), *fields)


def test_another_accounts_campaign_or_contact_is_refused(api_client, other_client, account):
    campaign = CampaignFactory(account=account)
    [enrollment] = pending(campaign, 1)
    assert_error(_preview(other_client, campaign), 404, "campaign_not_found")
    mine = CampaignFactory(account=campaign.account)
    foreign = ContactFactory()
    response = _preview(api_client, mine, {"contact_ids": [str(foreign.pk)]})
    assert_fields(response, "contact_ids.0")


def test_its_queries_do_not_grow_with_the_contacts(api_client, account):
    campaign = CampaignFactory(account=account)
    pending(campaign, 2)
    _preview(api_client, campaign)  # the period's usage row, the key's first use
    with CaptureQueriesContext(connection) as few:
        assert _preview(api_client, campaign).status_code == 200
    pending(campaign, 20)
    with CaptureQueriesContext(connection) as many:
        assert _preview(api_client, campaign).json()["dispatched"] == 22
    assert len(many) == len(few)
