"""Simulator mailboxes through the API (docs/sandbox.md): `POST /smtp_credentials/simulator`,
what a simulator has none of, and the rules that keep the simulator's addresses away from
real mailboxes."""

from datetime import UTC, datetime

import pytest
from django.utils import timezone

from billing.usage import usage_record_current
from outreach.domains.services import sender_domains_check_due
from outreach.intake.mailbox import mailboxes_due
from outreach.models.campaigns import Campaign
from outreach.models.contacts import Contact
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Enrollment
from tests.outreach.factories import CampaignFactory, ContactFactory, CredentialFactory
from tests.outreach.helpers import assert_error, assert_fields
from tests.outreach.test_simulator_sending import enroll, run, simulated_campaign, simulator_mailbox
from tests.support.usage import usage_set

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)


def _mail_servers(attempts) -> list:
    """Connections tried, less the test's own database and Redis (rate limits)."""
    return [a for a in attempts if a[1] not in (5432, 6379)]


def _create(api_client, **body):
    return api_client.post(
        "/smtp_credentials/simulator", {"from_email": "me@acme.example", **body}, format="json"
    )


# --- POST /smtp_credentials/simulator ----------------------------------------------------


def test_it_creates_a_simulator_mailbox(api_client, account, connect_attempts):
    response = _create(api_client, from_name="Me", daily_limit=200)

    assert response.status_code == 201, response.content
    body = response.json()
    assert body["auth_method"] == "simulator"
    assert (body["from_email"], body["from_name"], body["daily_limit"]) == (
        "me@acme.example",
        "Me",
        200,
    )
    # Unpaced unless given a pace; no server, no login.
    assert (body["min_interval_seconds"], body["max_interval_seconds"]) == (0, 0)
    assert (body["smtp_host"], body["imap_host"]) == ("", "")
    assert body["smtp_password_set"] is False and body["oauth_status"] is None
    assert "verification" not in body
    listed = api_client.get("/smtp_credentials").json()
    assert [(c["id"], c["auth_method"]) for c in listed] == [(body["id"], "simulator")]
    assert _mail_servers(connect_attempts) == []


def test_it_takes_a_pace(api_client):
    body = _create(api_client, min_interval_seconds=30, max_interval_seconds=90).json()
    assert (body["min_interval_seconds"], body["max_interval_seconds"]) == (30, 90)
    only_min = _create(api_client, min_interval_seconds=30).json()
    assert (only_min["min_interval_seconds"], only_min["max_interval_seconds"]) == (30, 30)


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ({"from_email": "not an address"}, {"from_email"}),
        ({"min_interval_seconds": 90, "max_interval_seconds": 30}, {"min_interval_seconds"}),
        ({"daily_limit": -1}, {"daily_limit"}),
        ({"daily_limit": 10**7}, {"daily_limit"}),
        ({"smtp_host": "smtp.example.com"}, {"smtp_host"}),
        ({"smtp_password": "x"}, {"smtp_password"}),
    ],
)
def test_invalid_bodies_are_validation_failed(api_client, body, fields):
    assert_fields(_create(api_client, **body), *fields)
    assert not SmtpCredential.objects.exists()


def test_a_simulator_is_given_no_server_and_needs_no_login(api_client, settings):
    settings.SMTP_REQUIRE_LOGIN = True
    created = _create(api_client).json()
    url = f"/smtp_credentials/{created['id']}"
    for field, value in [("smtp_host", "smtp.example.com"), ("imap_host", "imap.example.com")]:
        assert_fields(api_client.patch(url, {field: value}, format="json"), field)
    changed = api_client.patch(url, {"daily_limit": 20, "disabled_at": None}, format="json")
    assert changed.status_code == 200, changed.content
    assert changed.json()["daily_limit"] == 20
    assert SmtpCredential.objects.get().smtp_host == ""


def test_another_accounts_simulator_is_not_found(api_client, other_client):
    created = _create(api_client).json()
    assert_error(
        other_client.get(f"/smtp_credentials/{created['id']}"), 404, "credential_not_found"
    )


def test_its_check_connects_to_nothing(api_client, connect_attempts):
    created = _create(api_client).json()
    response = api_client.post(f"/smtp_credentials/{created['id']}/verify")
    assert response.json() == {"smtp": {"ok": True, "error": None}, "imap": None}
    assert _mail_servers(connect_attempts) == []


def test_it_is_never_polled_nor_its_domain_checked(account, fake_dns):
    simulator = simulator_mailbox(account, imap_host="imap.example.com")  # a stored oddity
    assert simulator not in mailboxes_due()
    assert sender_domains_check_due() == 0
    assert fake_dns.lookups == []


# --- in campaigns -------------------------------------------------------------------------


def test_the_thread_names_the_simulator(api_client, account):
    campaign = simulated_campaign(account=account)
    enrollment = enroll(campaign, "ada@simulator.test", at=timezone.now())
    run(timezone.now())
    entries = api_client.get(f"/campaigns/{campaign.pk}/enrollments/{enrollment.pk}/thread").json()
    assert [(e["type"], e["auth_method"]) for e in entries] == [("step", "simulator")]


def test_a_simulated_campaign_takes_simulator_addresses_without_a_dns_lookup(
    api_client, account, settings, fake_dns
):
    settings.RECIPIENT_DOMAIN_CHECK = True
    campaign = simulated_campaign(account=account)
    response = api_client.post(
        "/outreaches",
        {"campaign_id": str(campaign.pk), "contact": {"email": "Ada+Reply@Simulator.test"}},
        format="json",
    )
    assert response.status_code == 201, response.content
    assert Contact.objects.get().email == "Ada+Reply@simulator.test"
    assert fake_dns.lookups == []


def test_a_campaign_with_a_real_mailbox_refuses_simulator_addresses(api_client, account):
    campaign = CampaignFactory(account=account)  # a real mailbox
    campaign.credentials.add(simulator_mailbox(account))  # and a simulator: still refused
    response = api_client.post(
        "/outreaches",
        {"campaign_id": str(campaign.pk), "contact": {"email": "ada@simulator.test"}},
        format="json",
    )
    assert "simulator.test" in assert_fields(response, "contact.email")["contact.email"][0]
    assert not Enrollment.objects.exists()


def _import(api_client, capture, campaign, emails):
    body = {"campaign_id": str(campaign.pk), "contacts": [{"email": e} for e in emails]}
    with capture(execute=True):
        response = api_client.post("/contact_imports", body, format="json")
    assert response.status_code == 201, response.content
    return api_client.get(f"/contact_imports/{response.json()['id']}").json()


def test_an_import_into_a_campaign_with_a_real_mailbox_skips_simulator_addresses(
    api_client, account, django_capture_on_commit_callbacks
):
    campaign = CampaignFactory(account=account)
    emails = ["ada@simulator.test", "bo@example.org", "ADA@simulator.test"]
    done = _import(api_client, django_capture_on_commit_callbacks, campaign, emails)
    assert (done["created_count"], done["skipped_count"]) == (1, 2)
    assert [(e["row"], e["reason"]) for e in done["errors"]] == [
        (0, "simulator_address"),
        (2, "simulator_address"),
    ]
    assert list(Enrollment.objects.values_list("contact__email", flat=True)) == ["bo@example.org"]


def test_an_import_into_a_simulated_campaign_keeps_them(
    api_client, account, django_capture_on_commit_callbacks
):
    campaign = simulated_campaign(account=account)
    emails = ["ada+ooo@simulator.test"]
    done = _import(api_client, django_capture_on_commit_callbacks, campaign, emails)
    assert (done["created_count"], done["skipped_count"]) == (1, 0)
    assert Enrollment.objects.filter(campaign=campaign).count() == 1


def test_a_real_mailbox_is_refused_where_simulator_addresses_are(api_client, account):
    campaign = simulated_campaign(account=account)
    Enrollment.objects.create(
        campaign=campaign, contact=ContactFactory(account=account, email="ada@simulator.test")
    )
    simulator = campaign.credentials.get()
    real = CredentialFactory(account=account)
    url = f"/campaigns/{campaign.pk}"
    response = api_client.patch(
        url, {"credential_ids": [str(simulator.pk), str(real.pk)]}, format="json"
    )
    assert_fields(response, "credential_ids")
    assert list(campaign.credentials.all()) == [simulator]
    # Simulators only: fine.
    other = simulator_mailbox(account)
    ok = api_client.patch(
        url, {"credential_ids": [str(simulator.pk), str(other.pk)]}, format="json"
    )
    assert ok.status_code == 200, ok.content


def test_a_real_mailbox_is_refused_once_a_simulated_campaign_was_dispatched(api_client, account):
    campaign = simulated_campaign(account=account)
    enroll(campaign, "someone@example.org")  # a real address, dispatched on a simulator
    real = CredentialFactory(account=account)
    response = api_client.patch(
        f"/campaigns/{campaign.pk}", {"credential_ids": [str(real.pk)]}, format="json"
    )
    assert_fields(response, "credential_ids")


def test_the_soft_cap_does_not_stop_a_simulated_campaign(api_client, account):
    usage_set(usage_record_current(account=account), account.plan.monthly_limit)
    campaign = simulated_campaign(account=account)
    Enrollment.objects.create(
        campaign=campaign, contact=ContactFactory(account=account, email="ada@simulator.test")
    )
    response = api_client.post(
        f"/campaigns/{campaign.pk}/dispatch", {"all_pending": True}, format="json"
    )
    assert response.status_code == 200, response.content
    assert response.json()["dispatched"] == 1
    real = CampaignFactory(account=account, status=Campaign.Status.DRAFT)
    Enrollment.objects.create(campaign=real, contact=ContactFactory(account=account))
    refused = api_client.post(
        f"/campaigns/{real.pk}/dispatch", {"all_pending": True}, format="json"
    )
    assert_error(refused, 402, "plan_limit_reached")


def test_sending_status_says_the_simulator_day_is_done(api_client, account, settings):
    settings.SIMULATOR_DAILY_LIMIT = 1
    campaign = simulated_campaign(account=account)
    now = timezone.now()
    enroll(campaign, "a@simulator.test", at=now)
    enroll(campaign, "b@simulator.test", at=now)
    run(now)
    body = api_client.get(f"/campaigns/{campaign.pk}/sending_status").json()
    [mailbox] = body["mailboxes"]
    codes = [r["code"] for r in mailbox["reasons"]]
    assert "simulator_daily_limit" in codes


def test_connecting_an_oauth_mailbox_of_its_address_leaves_the_simulator_one(
    api_client, anon_client, account, oauth_provider
):
    from tests.outreach.test_oauth import OWNER, connect

    simulator = simulator_mailbox(account, from_email=OWNER)
    credential = connect(api_client, anon_client, oauth_provider())
    assert credential.pk != simulator.pk
    simulator.refresh_from_db()
    assert (simulator.auth_method, simulator.smtp_host) == ("simulator", "")


def test_a_contact_in_a_campaign_with_a_real_mailbox_cannot_take_a_simulator_address(
    api_client, account
):
    campaign = CampaignFactory(account=account)
    contact = ContactFactory(account=account, email="ada@example.org")
    Enrollment.objects.create(campaign=campaign, contact=contact)
    url = f"/contacts/{contact.pk}"
    assert_fields(api_client.patch(url, {"email": "ada@simulator.test"}, format="json"), "email")
    elsewhere = ContactFactory(account=account, email="bo@example.org")
    Enrollment.objects.create(campaign=simulated_campaign(account=account), contact=elsewhere)
    moved = api_client.patch(
        f"/contacts/{elsewhere.pk}", {"email": "bo@simulator.test"}, format="json"
    )
    assert moved.status_code == 200, moved.content
