"""The account's suppression list: an unsubscribe, complaint or bounce outlives the
contact row, so deleting a contact and adding the address again (API, import,
outreach, PATCH) brings it back suppressed, never enrolled, dispatched or sent to."""

import importlib
from datetime import timedelta

import pytest
from django.apps import apps
from django.test import Client
from django.utils import timezone

from outreach.intake.services import contact_unsubscribe
from outreach.models.contacts import Contact, Suppression
from outreach.models.sending import Enrollment
from outreach.sending import tokens
from outreach.sending.bounces import enrollment_mark_bounced
from outreach.sending.scheduler import schedule_due
from tests.intake.factories import sent_enrollment
from tests.outreach.factories import CampaignFactory, ContactFactory, EnrollmentFactory
from tests.outreach.helpers import assert_fields
from tests.outreach.test_contact_imports import run, run_json

pytestmark = pytest.mark.django_db

EMAIL = "Gone@Example.org"
KEY = "gone@example.org"


def _iso(at) -> str:
    return at.isoformat().replace("+00:00", "Z")


def _unsubscribed_then_deleted(api_client, account):
    """The contact clicks the unsubscribe link, then the user deletes the contact."""
    enrollment = sent_enrollment(
        account=account, contact=ContactFactory(account=account, email=EMAIL)
    )
    url = f"/u/{tokens.token_make(purpose=tokens.UNSUBSCRIBE, enrollment_id=enrollment.pk)}"
    assert Client().post(url, {"List-Unsubscribe": "One-Click"}).status_code == 200
    contact = Contact.objects.get(pk=enrollment.contact_id)
    assert api_client.delete(f"/contacts/{contact.pk}").status_code == 204
    assert not Contact.objects.filter(email_lower=KEY).exists()
    return contact.unsubscribed_at


def _bounced_then_deleted(api_client, account):
    enrollment = sent_enrollment(
        account=account, contact=ContactFactory(account=account, email=EMAIL)
    )
    assert enrollment_mark_bounced(enrollment=enrollment, reason="550 5.1.1 no such user")
    contact = Contact.objects.get(pk=enrollment.contact_id)
    assert api_client.delete(f"/contacts/{contact.pk}").status_code == 204
    return contact.bounced_at


def test_suppressing_services_record_the_address_once(account):
    enrollment = sent_enrollment(
        account=account, contact=ContactFactory(account=account, email=EMAIL)
    )
    first = timezone.now() - timedelta(hours=1)
    contact_unsubscribe(contact_id=enrollment.contact_id, at=first)
    contact_unsubscribe(contact_id=enrollment.contact_id)  # again: the first time stays
    contact_unsubscribe(contact_id=enrollment.contact_id, reason="complained")
    other = sent_enrollment(account=account)
    enrollment_mark_bounced(enrollment=other, reason="550")
    rows = Suppression.objects.order_by("email_lower", "reason")
    assert list(rows.values_list("account_id", "email_lower", "reason")) == [
        (account.pk, other.contact.email_lower, "bounced"),
        (account.pk, KEY, "complained"),
        (account.pk, KEY, "unsubscribed"),
    ]
    assert rows.get(reason="unsubscribed").at == first


def test_api_create_after_delete_comes_back_unsubscribed(api_client, account):
    unsubscribed_at = _unsubscribed_then_deleted(api_client, account)
    response = api_client.post("/contacts", {"email": "GONE@example.org"}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["unsubscribed_at"] == _iso(unsubscribed_at)
    assert body["bounced_at"] is None
    assert api_client.get("/contacts", {"unsubscribed": "true"}).json()[0]["id"] == body["id"]


def test_api_create_after_a_bounce_comes_back_bounced(api_client, account):
    bounced_at = _bounced_then_deleted(api_client, account)
    body = api_client.post("/contacts", {"email": EMAIL}, format="json").json()
    assert body["bounced_at"] == _iso(bounced_at)
    assert body["unsubscribed_at"] is None


def test_another_accounts_suppression_does_not_apply(api_client, account, other_client):
    _unsubscribed_then_deleted(api_client, account)
    body = other_client.post("/contacts", {"email": EMAIL}, format="json").json()
    assert body["unsubscribed_at"] is None and body["bounced_at"] is None


def test_patching_an_email_to_a_suppressed_address_suppresses_it(api_client, account):
    unsubscribed_at = _unsubscribed_then_deleted(api_client, account)
    contact = ContactFactory(account=account, email="fresh@example.org")
    response = api_client.patch(f"/contacts/{contact.pk}", {"email": EMAIL}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["unsubscribed_at"] == _iso(unsubscribed_at)
    # Other changes leave it alone.
    response = api_client.patch(f"/contacts/{contact.pk}", {"first_name": "X"}, format="json")
    assert response.json()["unsubscribed_at"] == _iso(unsubscribed_at)


def test_csv_import_recreates_suppressed_and_does_not_enroll(
    api_client, account, django_capture_on_commit_callbacks
):
    bounced_at = _bounced_then_deleted(api_client, account)
    campaign = CampaignFactory(account=account)
    result = run(
        django_capture_on_commit_callbacks,
        api_client,
        f"email\n{EMAIL}\nnew@example.org\n",
        campaign_id=str(campaign.pk),
    )
    assert (result["status"], result["created_count"]) == ("completed", 2)
    gone = Contact.objects.get(account=account, email_lower=KEY)
    assert gone.bounced_at == bounced_at
    assert Contact.objects.get(email_lower="new@example.org").is_suppressed is False
    assert list(
        Enrollment.objects.filter(campaign=campaign).values_list("contact__email_lower", flat=True)
    ) == ["new@example.org"]


def test_json_import_recreates_suppressed_and_does_not_enroll(
    api_client, account, django_capture_on_commit_callbacks
):
    unsubscribed_at = _unsubscribed_then_deleted(api_client, account)
    campaign = CampaignFactory(account=account)
    body = {"contacts": [{"email": KEY, "first_name": "G"}], "campaign_id": str(campaign.pk)}
    result = run_json(django_capture_on_commit_callbacks, api_client, body)
    assert (result["status"], result["created_count"]) == ("completed", 1)
    gone = Contact.objects.get(account=account, email_lower=KEY)
    assert (gone.unsubscribed_at, gone.first_name) == (unsubscribed_at, "G")
    assert not Enrollment.objects.filter(campaign=campaign).exists()


def test_outreach_refuses_a_deleted_unsubscribed_address(api_client, account):
    _unsubscribed_then_deleted(api_client, account)
    campaign = CampaignFactory(account=account)
    response = api_client.post(
        "/outreaches",
        {"campaign_id": str(campaign.pk), "contact": {"email": EMAIL}},
        format="json",
    )
    fields = assert_fields(response, "contact.email")
    assert "unsubscribed" in fields["contact.email"][0]
    assert not Enrollment.objects.filter(campaign=campaign).exists()
    assert not Contact.objects.filter(email_lower=KEY).exists()  # the 422 rolled it back


def test_dispatch_and_the_scheduler_skip_a_recreated_contact(api_client, account):
    _unsubscribed_then_deleted(api_client, account)
    contact_id = api_client.post("/contacts", {"email": EMAIL}, format="json").json()["id"]
    campaign = CampaignFactory(account=account, status="active")
    pending = EnrollmentFactory(campaign=campaign, contact_id=contact_id)
    response = api_client.post(
        f"/campaigns/{campaign.pk}/dispatch", {"all_pending": True}, format="json"
    )
    assert response.json()["dispatched"] == 0
    pending.refresh_from_db()
    assert pending.status == "pending"
    # Even an enrollment somehow scheduled is never handed to a sender.
    other = CampaignFactory(account=account, status="active")
    now = timezone.now()
    scheduled = EnrollmentFactory(
        campaign=other, contact_id=contact_id, status="scheduled", next_send_at=now
    )
    assert schedule_due(now=now + timedelta(seconds=1)) == []
    scheduled.refresh_from_db()
    assert scheduled.status == "unsubscribed"
    assert scheduled.current_step == 0


def test_the_migration_backfills_existing_suppressed_contacts(account, other_account):
    at = timezone.now() - timedelta(days=3)
    ContactFactory(account=account, email="U@example.org", unsubscribed_at=at)
    ContactFactory(account=account, email="b@example.org", bounced_at=at)
    ContactFactory(
        account=other_account, email="both@example.org", unsubscribed_at=at, bounced_at=at
    )
    ContactFactory(account=account, email="fine@example.org")
    migration = importlib.import_module("outreach.migrations.0006_suppression")
    migration.backfill(apps, None)
    migration.backfill(apps, None)  # re-running adds nothing
    rows = Suppression.objects.order_by("email_lower", "reason")
    assert list(rows.values_list("account_id", "email_lower", "reason", "at")) == [
        (account.pk, "b@example.org", "bounced", at),
        (other_account.pk, "both@example.org", "bounced", at),
        (other_account.pk, "both@example.org", "unsubscribed", at),
        (account.pk, "u@example.org", "unsubscribed", at),
    ]
