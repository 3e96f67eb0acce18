"""Recipient time zones: Contact.timezone (API, CSV and JSON imports) and campaigns with
send_in_contact_timezone, whose send window is read in each contact's zone (DST-correct),
with a controllable clock and a real SMTP server."""

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from outreach.campaigns.dispatch import campaign_dispatch
from outreach.models.campaigns import Campaign, CampaignStep
from outreach.models.contacts import Contact
from outreach.models.sending import Enrollment, Message
from outreach.sending.scheduler import schedule_due
from outreach.sending.send import batch_send
from tests.outreach.factories import (
    CampaignFactory,
    ContactFactory,
    CredentialFactory,
    EnrollmentFactory,
)
from tests.outreach.helpers import assert_fields
from tests.outreach.test_contact_imports import run, run_json

pytestmark = pytest.mark.django_db

MORNING = {"start": "09:00", "end": "10:00", "days": [1, 2, 3, 4, 5]}


# --- the field ---------------------------------------------------------------------------


def test_a_contact_carries_its_time_zone(api_client):
    response = api_client.post(
        "/contacts", {"email": "ken@example.jp", "timezone": "Asia/Tokyo"}, format="json"
    )
    assert response.status_code == 201, response.content
    contact_id = response.json()["id"]
    assert response.json()["timezone"] == "Asia/Tokyo"
    assert api_client.get("/contacts").json()[0]["timezone"] == "Asia/Tokyo"
    response = api_client.patch(f"/contacts/{contact_id}", {"timezone": None}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["timezone"] is None
    assert Contact.objects.get().timezone == ""


@pytest.mark.parametrize("value", ["Mars/Olympus_Mons", "tokyo", 9, ["Asia/Tokyo"], "x" * 65])
def test_an_unknown_time_zone_is_refused(api_client, value):
    response = api_client.post(
        "/contacts", {"email": "a@example.org", "timezone": value}, format="json"
    )
    assert_fields(response, "timezone")
    assert not Contact.objects.exists()


def test_a_patch_with_an_unknown_time_zone_writes_nothing(api_client, account):
    contact = ContactFactory(account=account, timezone="Europe/Paris")
    response = api_client.patch(
        f"/contacts/{contact.pk}", {"timezone": "Europe/Atlantis", "company": "X"}, format="json"
    )
    assert_fields(response, "timezone")
    contact.refresh_from_db()
    assert (contact.timezone, contact.company) == ("Europe/Paris", "Acme")


def test_an_outreach_takes_the_contacts_time_zone(api_client, account):
    campaign = CampaignFactory(account=account)
    response = api_client.post(
        "/outreaches",
        {
            "campaign_id": str(campaign.pk),
            "contact": {"email": "ny@example.org", "timezone": "America/New_York"},
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    assert Contact.objects.get().timezone == "America/New_York"
    response = api_client.post(
        "/outreaches",
        {"campaign_id": str(campaign.pk), "contact": {"email": "b@example.org", "timezone": "x"}},
        format="json",
    )
    assert response.status_code == 422
    assert not Contact.objects.filter(email="b@example.org").exists()


def test_a_csv_timezone_column_sets_it_and_an_unknown_one_rejects_the_row(
    api_client, account, django_capture_on_commit_callbacks
):
    ContactFactory(account=account, email="old@example.org", timezone="Europe/Paris")
    csv = (
        "email,Time Zone\n"
        "ken@example.jp,Asia/Tokyo\n"
        "bad@example.org,Atlantis/Capital\n"
        "none@example.org,\n"
        "old@example.org,\n"  # an empty cell keeps what the contact had
    )
    result = run(django_capture_on_commit_callbacks, api_client, csv)
    assert result["status"] == "completed", result
    assert (result["created_count"], result["updated_count"], result["skipped_count"]) == (2, 1, 1)
    [error] = result["errors"]
    assert (error["row"], error["email"]) == (3, "bad@example.org")
    assert error["message"].startswith("timezone: 'Atlantis/Capital' is not an IANA time zone")
    zones = dict(Contact.objects.values_list("email", "timezone"))
    assert zones == {
        "ken@example.jp": "Asia/Tokyo",
        "none@example.org": "",
        "old@example.org": "Europe/Paris",
    }
    assert "timezone" not in Contact.objects.get(email="ken@example.jp").fields


def test_a_json_import_takes_timezone(api_client, django_capture_on_commit_callbacks):
    body = {
        "contacts": [
            {"email": "a@example.org", "timezone": "America/New_York"},
            {"email": "b@example.org", "timezone": 5},
        ]
    }
    result = run_json(django_capture_on_commit_callbacks, api_client, body)
    assert (result["created_count"], result["skipped_count"]) == (1, 1)
    assert Contact.objects.get().timezone == "America/New_York"


def test_a_campaign_sends_in_contact_time_zones_on_request(api_client):
    response = api_client.post("/campaigns", {"name": "Local"}, format="json")
    assert response.json()["send_in_contact_timezone"] is False
    campaign_id = response.json()["id"]
    response = api_client.patch(
        f"/campaigns/{campaign_id}", {"send_in_contact_timezone": True}, format="json"
    )
    assert response.json()["send_in_contact_timezone"] is True
    response = api_client.patch(
        f"/campaigns/{campaign_id}", {"send_in_contact_timezone": "yes"}, format="json"
    )
    assert_fields(response, "send_in_contact_timezone")


# --- sending in the contacts' mornings ---------------------------------------------------


@pytest.fixture
def sink(smtp_sink):
    return smtp_sink()


def _campaign(sink, *, steps=1, per_contact=True) -> Campaign:
    credential = CredentialFactory(
        smtp_host=sink.host, smtp_port=sink.port, smtp_security="none", smtp_username=""
    )
    campaign = CampaignFactory(
        account=credential.account,
        with_steps=steps,
        with_credential=False,
        timezone="UTC",
        send_window=MORNING,
        send_in_contact_timezone=per_contact,
    )
    campaign.credentials.add(credential)
    return campaign


def _enroll(campaign, email, zone="") -> Enrollment:
    contact = ContactFactory(account=campaign.account, email=email, timezone=zone)
    return EnrollmentFactory(campaign=campaign, contact=contact)


def _tick(now) -> None:
    for batch in schedule_due(now=now):
        batch_send(batch_id=batch.batch_id, credential_id=batch.credential_id, clock=lambda: now)


def _local_sends(zone: str) -> list[datetime]:
    messages = Message.objects.filter(enrollment__contact__timezone=zone).order_by("sent_at")
    return [m.sent_at.astimezone(ZoneInfo(zone or "UTC")) for m in messages]


def test_tokyo_and_new_york_get_the_same_step_in_their_own_mornings(sink):
    campaign = _campaign(sink)
    _enroll(campaign, "ken@example.jp", "Asia/Tokyo")
    _enroll(campaign, "amy@example.org", "America/New_York")
    _enroll(campaign, "uma@example.org")  # no zone: the campaign's (UTC)
    # Monday 2026-03-02 10:00 UTC: 19:00 in Tokyo, 05:00 in New York, the window's end here.
    start = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
    assert campaign_dispatch(campaign=campaign, now=start) == 3

    now = start
    while now < start + timedelta(days=2):
        _tick(now)
        now += timedelta(minutes=15)

    [tokyo] = _local_sends("Asia/Tokyo")
    [new_york] = _local_sends("America/New_York")
    [utc] = _local_sends("")
    assert (tokyo.date().isoformat(), tokyo.hour) == ("2026-03-03", 9)  # Tuesday, 00:00 UTC
    assert (new_york.date().isoformat(), new_york.hour) == ("2026-03-02", 9)  # Monday, 14:00 UTC
    assert (utc.date().isoformat(), utc.hour) == ("2026-03-03", 9)
    assert len(sink.messages) == 3


def test_without_the_option_the_campaigns_zone_holds_for_everyone(sink):
    campaign = _campaign(sink, per_contact=False)
    tokyo = _enroll(campaign, "ken@example.jp", "Asia/Tokyo")
    campaign_dispatch(campaign=campaign, now=datetime(2026, 3, 2, 10, 0, tzinfo=UTC))
    tokyo.refresh_from_db()
    assert tokyo.next_send_at == datetime(2026, 3, 3, 9, 0, tzinfo=UTC)


def test_the_window_follows_daylight_saving_time_in_the_contacts_zone(sink):
    """New York moves to daylight time on Sunday 2026-03-08: its 09:00 is 14:00 UTC on
    Friday the 6th and 13:00 UTC on Monday the 9th. Tokyo has no DST."""
    campaign = _campaign(sink, steps=2)
    # Three days less half an hour: 13:30 UTC on Monday, inside the window only because
    # New York is on daylight time by then (08:30 on standard time).
    CampaignStep.objects.filter(campaign=campaign, position=2).update(
        delay_minutes=3 * 24 * 60 - 30
    )
    new_york = _enroll(campaign, "amy@example.org", "America/New_York")
    tokyo = _enroll(campaign, "ken@example.jp", "Asia/Tokyo")
    friday = datetime(2026, 3, 6, 13, 30, tzinfo=UTC)  # 08:30 in New York, 22:30 in Tokyo
    campaign_dispatch(campaign=campaign, now=friday)
    new_york.refresh_from_db()
    tokyo.refresh_from_db()
    assert new_york.next_send_at == datetime(2026, 3, 6, 14, 0, tzinfo=UTC)
    assert tokyo.next_send_at == datetime(2026, 3, 9, 0, 0, tzinfo=UTC)  # Monday 09:00 JST

    _tick(datetime(2026, 3, 6, 13, 59, tzinfo=UTC))
    assert sink.messages == []
    _tick(datetime(2026, 3, 6, 14, 0, tzinfo=UTC))
    assert [m.rcpt_tos for m in sink.messages] == [["amy@example.org"]]
    new_york.refresh_from_db()
    assert new_york.next_send_at == datetime(2026, 3, 9, 13, 30, tzinfo=UTC)
    _tick(datetime(2026, 3, 9, 0, 0, tzinfo=UTC))
    assert len(sink.to("ken@example.jp")) == 1
    _tick(datetime(2026, 3, 9, 13, 30, tzinfo=UTC))
    assert len(sink.to("amy@example.org")) == 2
    first, second = _local_sends("America/New_York")
    assert (first.hour, first.utcoffset()) == (9, timedelta(hours=-5))
    assert (second.hour, second.utcoffset()) == (9, timedelta(hours=-4))


def test_a_follow_up_due_outside_the_contacts_window_waits_for_its_morning(sink):
    campaign = _campaign(sink, steps=2)
    CampaignStep.objects.filter(campaign=campaign, position=2).update(delay_minutes=12 * 60)
    new_york = _enroll(campaign, "amy@example.org", "America/New_York")
    monday = datetime(2026, 3, 9, 13, 0, tzinfo=UTC)  # 09:00 EDT
    campaign_dispatch(campaign=campaign, now=monday)
    _tick(monday)
    new_york.refresh_from_db()
    # Due at 21:00 New York time; the next opening there is Tuesday 09:00 EDT.
    assert new_york.next_send_at == datetime(2026, 3, 10, 13, 0, tzinfo=UTC)
