"""An unsubscribe link outlives its campaign and its enrollment, while its contact
exists."""

from datetime import UTC, datetime
from urllib.parse import urlsplit

import pytest
from django.test import Client

from outreach import enrollments
from outreach.models.campaigns import Campaign, CampaignStep
from outreach.models.contacts import Contact, Suppression
from outreach.models.sending import Enrollment
from outreach.models.tombstones import DeletedEnrollment
from outreach.sending import tokens
from outreach.sending.scheduler import schedule_due
from outreach.sending.send import batch_send
from tests.intake.factories import sent_enrollment
from tests.intake.helpers import events
from tests.outreach.factories import CampaignFactory, ContactFactory, EnrollmentFactory

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
ONE_CLICK = {
    "data": "List-Unsubscribe=One-Click",
    "content_type": "application/x-www-form-urlencoded",
}


def legacy_link(enrollment_id) -> str:
    """The link as emails sent before links named their contact carry it."""
    return f"/u/{tokens.token_make(purpose=tokens.UNSUBSCRIBE, enrollment_id=enrollment_id)}"


def sent_link(smtp_sink, account) -> tuple[str, Enrollment]:
    """Step 1 of a campaign of `account` sent to a contact through the sending engine:
    the path of the List-Unsubscribe link of the email received, and the enrollment."""
    sink = smtp_sink()
    campaign = CampaignFactory(account=account, status=Campaign.Status.ACTIVE, with_steps=2)
    credential = campaign.credentials.get()
    credential.smtp_host, credential.smtp_port = sink.host, sink.port
    credential.smtp_security, credential.smtp_username = "none", ""
    credential.from_name = "Sam Sender"
    credential.save()
    CampaignStep.objects.filter(campaign=campaign).update(body_text="Hi")
    enrollment = EnrollmentFactory(
        campaign=campaign,
        contact=ContactFactory(account=account, email="ada@example.org"),
        status=Enrollment.Status.SCHEDULED,
        next_send_at=NOW,
    )
    for batch in schedule_due(now=NOW):
        batch_send(batch_id=batch.batch_id, credential_id=batch.credential_id, clock=lambda: NOW)
    [received] = sink.messages
    header = received.message["List-Unsubscribe"]
    url = header.split(",")[0].strip().strip("<>")
    return urlsplit(url).path, enrollment


def elsewhere(contact) -> Enrollment:
    """The contact's active enrollment in another campaign of its account."""
    return sent_enrollment(
        campaign=CampaignFactory(account=contact.account, status="active", with_steps=2),
        contact=contact,
    )


def assert_unsubscribed_account_wide(contact, other: Enrollment) -> None:
    contact.refresh_from_db()
    assert contact.unsubscribed_at is not None
    other.refresh_from_db()
    assert other.status == Enrollment.Status.UNSUBSCRIBED
    assert Suppression.objects.filter(
        account=contact.account, email_lower=contact.email_lower, reason="unsubscribed"
    ).exists()
    # One event per active enrollment of the contact (SPEC.md §6): the deleted
    # campaign's enrollment is no longer one, so only the other campaign's is announced.
    [fired] = events("enrollment.unsubscribed")
    assert fired.data["enrollment_id"] == str(other.pk)
    assert fired.data["campaign_id"] == str(other.campaign_id)


# --- the campaign is deleted -----------------------------------------------------------


def test_a_sent_link_works_after_its_campaign_is_deleted(smtp_sink, api_client, account):
    path, enrollment = sent_link(smtp_sink, account)
    contact = enrollment.contact
    other = elsewhere(contact)
    assert api_client.delete(f"/campaigns/{enrollment.campaign_id}").status_code == 204
    assert not Enrollment.objects.filter(pk=enrollment.pk).exists()

    page = Client().get(path)
    assert page.status_code == 200
    text = page.content.decode()
    assert "ada@example.org" in text and "Sam Sender" in text
    assert '<form method="post"' in text

    done = Client(enforce_csrf_checks=True).post(path, **ONE_CLICK)
    assert done.status_code == 200
    assert "You are unsubscribed" in done.content.decode()
    assert_unsubscribed_account_wide(contact, other)

    # Idempotent, as before.
    assert Client().post(path, **ONE_CLICK).status_code == 200
    assert len(events("enrollment.unsubscribed")) == 1


def test_a_sent_link_works_with_no_tombstone(smtp_sink, account):
    # The link names the contact: even with the tombstone gone (a delete that bypassed
    # the service), it still finds the contact.
    path, enrollment = sent_link(smtp_sink, account)
    contact = enrollment.contact
    Campaign.objects.filter(pk=enrollment.campaign_id).delete()
    assert not DeletedEnrollment.objects.exists()

    assert Client().post(path, **ONE_CLICK).status_code == 200
    contact.refresh_from_db()
    assert contact.unsubscribed_at is not None


def test_a_link_of_the_old_format_works_after_its_campaign_is_deleted(api_client, account):
    enrollment = sent_enrollment(account=account)
    contact = enrollment.contact
    other = elsewhere(contact)
    link = legacy_link(enrollment.pk)
    assert api_client.delete(f"/campaigns/{enrollment.campaign_id}").status_code == 204

    tombstone = DeletedEnrollment.objects.get()
    assert (tombstone.pk, tombstone.contact_id) == (enrollment.pk, contact.pk)
    page = Client().get(link)
    assert page.status_code == 200
    assert contact.email in page.content.decode()
    assert enrollment.credential.from_email in page.content.decode()

    assert Client().post(link, **ONE_CLICK).status_code == 200
    assert_unsubscribed_account_wide(contact, other)


def test_deleting_a_campaign_leaves_tombstones_of_the_enrollments_that_sent_only(
    api_client, account
):
    campaign = CampaignFactory(account=account, status="active", with_steps=2)
    sent = [sent_enrollment(campaign=campaign) for _ in range(3)]
    pending = EnrollmentFactory(campaign=campaign, contact=ContactFactory(account=account))
    assert api_client.delete(f"/campaigns/{campaign.pk}").status_code == 204

    assert set(DeletedEnrollment.objects.values_list("pk", flat=True)) == {e.pk for e in sent}
    # A pending enrollment sent nothing, so no email carries a link to it.
    assert Client().get(legacy_link(pending.pk)).status_code == 404
    assert Contact.objects.count() == 4  # contacts stay


def test_a_link_of_the_old_format_works_after_staff_delete_its_enrollment():
    enrollment = sent_enrollment()
    assert enrollments.enrollments_delete(enrollment_ids=[enrollment.pk]) == 1

    assert Client().post(legacy_link(enrollment.pk), **ONE_CLICK).status_code == 200
    enrollment.contact.refresh_from_db()
    assert enrollment.contact.unsubscribed_at is not None


def test_staff_deleting_campaigns_in_the_admin_leave_the_tombstones(admin_client):
    one, two = sent_enrollment(), sent_enrollment()
    page = admin_client.post(f"/admin/outreach/campaign/{one.campaign_id}/delete/", {"post": "yes"})
    assert page.status_code == 302
    page = admin_client.post(
        "/admin/outreach/campaign/",
        {"action": "delete_selected", "_selected_action": [two.campaign_id], "post": "yes"},
    )
    assert page.status_code == 302
    assert not Campaign.objects.exists()
    assert set(DeletedEnrollment.objects.values_list("pk", flat=True)) == {one.pk, two.pk}
    assert Client().post(legacy_link(two.pk), **ONE_CLICK).status_code == 200


def test_a_deleted_contacts_links_are_not_valid(api_client, account):
    enrollment = sent_enrollment(account=account)
    links = [
        legacy_link(enrollment.pk),
        "/u/"
        + tokens.token_make(
            purpose=tokens.UNSUBSCRIBE,
            enrollment_id=enrollment.pk,
            contact_id=enrollment.contact_id,
        ),
    ]
    assert api_client.delete(f"/campaigns/{enrollment.campaign_id}").status_code == 204
    assert api_client.delete(f"/contacts/{enrollment.contact_id}").status_code == 204

    assert not DeletedEnrollment.objects.exists()  # gone with the contact
    for link in links:
        page = Client().post(link, **ONE_CLICK)
        assert page.status_code == 404
        assert "not valid" in page.content.decode()
