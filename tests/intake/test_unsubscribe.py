"""GET and POST /u/<token>: the unsubscribe page and the (one-click) unsubscribe."""

import pytest
from django.test import Client

from outreach.models.sending import Enrollment
from outreach.sending import tokens
from tests.intake.factories import sent_enrollment
from tests.intake.helpers import events
from tests.outreach.factories import CampaignFactory, ContactFactory, EnrollmentFactory

pytestmark = pytest.mark.django_db


def unsubscribe_url(enrollment_id) -> str:
    return f"/u/{tokens.token_make(purpose=tokens.UNSUBSCRIBE, enrollment_id=enrollment_id)}"


@pytest.fixture
def contact_in_three_campaigns():
    """A contact sent to in campaign A, scheduled in B, completed in C; and another
    contact of the same account in A."""
    first = sent_enrollment()
    account, contact = first.campaign.account, first.contact
    scheduled = EnrollmentFactory(
        campaign=CampaignFactory(account=account, status="active"),
        contact=contact,
        status=Enrollment.Status.SCHEDULED,
        next_send_at=first.next_send_at,
    )
    completed = EnrollmentFactory(
        campaign=CampaignFactory(account=account, status="active"),
        contact=contact,
        status=Enrollment.Status.COMPLETED,
    )
    bystander = sent_enrollment(campaign=first.campaign)
    return first, scheduled, completed, bystander


def test_it_shows_a_confirmation_page_without_changing_anything():
    enrollment = sent_enrollment()
    response = Client().get(unsubscribe_url(enrollment.pk))
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    page = response.content.decode()
    assert enrollment.contact.email in page
    assert '<form method="post"' in page
    assert f'action="{unsubscribe_url(enrollment.pk)}"' in page
    assert "csrfmiddlewaretoken" not in page
    enrollment.contact.refresh_from_db()
    assert enrollment.contact.unsubscribed_at is None
    assert events() == []


def test_it_unsubscribes_every_active_enrollment_of_the_contact(contact_in_three_campaigns):
    first, scheduled, completed, bystander = contact_in_three_campaigns
    # The confirm button posts the form without any CSRF token.
    client = Client(enforce_csrf_checks=True)
    response = client.post(unsubscribe_url(first.pk), {"List-Unsubscribe": "One-Click"})
    assert response.status_code == 200
    assert "You are unsubscribed" in response.content.decode()

    contact = first.contact
    contact.refresh_from_db()
    assert contact.unsubscribed_at is not None
    assert contact.is_suppressed
    for enrollment in (first, scheduled):
        enrollment.refresh_from_db()
        assert enrollment.status == Enrollment.Status.UNSUBSCRIBED
        assert enrollment.unsubscribed_at == contact.unsubscribed_at
        assert enrollment.next_send_at is None  # nothing further is sent
    completed.refresh_from_db()
    assert completed.status == Enrollment.Status.COMPLETED
    bystander.refresh_from_db()
    assert bystander.status == Enrollment.Status.SENT

    fired = events("enrollment.unsubscribed")
    assert sorted(e.data["enrollment_id"] for e in fired) == sorted(
        [str(first.pk), str(scheduled.pk)]
    )
    stamp = contact.unsubscribed_at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert {
        "enrollment_id": str(scheduled.pk),
        "contact_id": str(contact.pk),
        "contact_email": contact.email,
        "campaign_id": str(scheduled.campaign_id),
        "unsubscribed_at": stamp,
    } in [e.data for e in fired]
    assert all(
        set(e.data)
        == {"enrollment_id", "contact_id", "contact_email", "campaign_id", "unsubscribed_at"}
        for e in fired
    )


def test_it_accepts_the_rfc8058_one_click_post(contact_in_three_campaigns):
    first, *_ = contact_in_three_campaigns
    # What a mail client sends: form-encoded body, no cookies, no CSRF token.
    response = Client(enforce_csrf_checks=True).post(
        unsubscribe_url(first.pk),
        data="List-Unsubscribe=One-Click",
        content_type="application/x-www-form-urlencoded",
    )
    assert response.status_code == 200
    first.refresh_from_db()
    assert first.status == Enrollment.Status.UNSUBSCRIBED
    assert len(events("enrollment.unsubscribed")) == 2


def test_a_second_post_changes_nothing_and_fires_nothing(contact_in_three_campaigns):
    first, *_ = contact_in_three_campaigns
    client = Client()
    client.post(unsubscribe_url(first.pk))
    first.contact.refresh_from_db()
    stamp = first.contact.unsubscribed_at

    again = client.post(unsubscribe_url(first.pk))
    assert again.status_code == 200
    assert "You are unsubscribed" in again.content.decode()
    first.contact.refresh_from_db()
    assert first.contact.unsubscribed_at == stamp
    assert len(events("enrollment.unsubscribed")) == 2
    # The page now says so instead of asking again.
    page = client.get(unsubscribe_url(first.pk))
    assert "You are unsubscribed" in page.content.decode()


def test_a_contact_with_no_active_enrollment_is_still_suppressed():
    contact = ContactFactory()
    enrollment = EnrollmentFactory(
        campaign=CampaignFactory(account=contact.account),
        contact=contact,
        status=Enrollment.Status.COMPLETED,
    )
    assert Client().post(unsubscribe_url(enrollment.pk)).status_code == 200
    contact.refresh_from_db()
    assert contact.unsubscribed_at is not None
    assert events() == []


@pytest.mark.parametrize("method", ["get", "post"])
def test_a_tampered_or_foreign_token_is_a_404_page(method):
    enrollment = sent_enrollment()
    good = unsubscribe_url(enrollment.pk)
    open_token = tokens.token_make(purpose=tokens.OPEN, enrollment_id=enrollment.pk)
    for path in (good[:-2] + "xx", "/u/garbage", f"/u/{open_token}"):
        response = getattr(Client(), method)(path)
        assert response.status_code == 404
        assert response["Content-Type"].startswith("text/html")
        assert "not valid" in response.content.decode()
    enrollment.contact.refresh_from_db()
    assert enrollment.contact.unsubscribed_at is None
    assert events() == []


def test_a_deleted_contact_is_a_404_page():
    enrollment = sent_enrollment()
    url = unsubscribe_url(enrollment.pk)
    enrollment.contact.delete()
    assert Client().post(url).status_code == 404


def test_other_methods_are_refused():
    enrollment = sent_enrollment()
    response = Client().put(unsubscribe_url(enrollment.pk))
    assert response.status_code == 405
    assert response.json()["code"] == "method_not_allowed"
