"""Back office for the sending engine: messages per enrollment, mailbox health."""

import re
from datetime import UTC, datetime

import pytest
from django.urls import reverse

from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Message
from outreach.sending.bounces import stats_increment
from tests.outreach.factories import CampaignFactory, EnrollmentFactory

pytestmark = pytest.mark.django_db

AT = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)


def test_enrollment_page_lists_its_messages(admin_client):
    enrollment = EnrollmentFactory()
    for step in (1, 2):
        Message.objects.create(
            account=enrollment.campaign.account,
            enrollment=enrollment,
            credential=enrollment.campaign.credentials.get(),
            step=step,
            message_id=f"step{step}-abc@example.com",
            to_email=enrollment.contact.email,
            subject="Re: Hello" if step == 2 else "Hello",
            sent_at=AT,
        )
    page = admin_client.get(reverse("admin:outreach_enrollment_change", args=[enrollment.pk]))
    assert page.status_code == 200
    assert b"step1-abc@example.com" in page.content
    assert b"step2-abc@example.com" in page.content
    assert b"Re: Hello" in page.content


def test_credential_pages_show_health(admin_client):
    campaign = CampaignFactory(bounce_threshold_percent=5.0)
    credential = campaign.credentials.get()
    SmtpCredential.objects.filter(pk=credential.pk).update(
        sent_count=18,
        bounced_count=2,
        last_error="authentication failed: 535 5.7.8 Bad credentials",
        last_error_at=AT,
    )
    stats_increment(credential_id=credential.pk, campaign_id=campaign.pk, sends=40, bounces=3)

    listing = admin_client.get(reverse("admin:outreach_smtpcredential_changelist"))
    assert listing.status_code == 200
    assert b"10.0%" in listing.content  # 2 bounces in 20 attempts

    page = admin_client.get(reverse("admin:outreach_smtpcredential_change", args=[credential.pk]))
    assert page.status_code == 200
    content = page.content.decode()
    assert "authentication failed: 535 5.7.8 Bad credentials" in content
    assert "Sends by campaign" in content
    assert "7.5%" in content  # 3 / 40 in the campaign
    assert "5.0%" in content  # its threshold


def test_credential_pages_show_the_pace_and_the_next_send(admin_client):
    campaign = CampaignFactory()
    credential = campaign.credentials.get()
    SmtpCredential.objects.filter(pk=credential.pk).update(
        min_interval_seconds=120, max_interval_seconds=300, next_send_earliest_at=AT
    )
    # On the mailbox's page (its list keeps to health and numbers, to fit 1280 px).
    url = reverse("admin:outreach_smtpcredential_change", args=[credential.pk])
    content = admin_client.get(url).content.decode()
    assert re.search(r'field-pace">.*?120-300 s', content, re.S)
    assert re.search(r"field-next_send_earliest_at.*?March 2, 2026, 10 a.m.", content, re.S)

    form = {"from_name": "", "daily_limit": 50, "min_interval_seconds": 60}
    refused = admin_client.post(url, {**form, "max_interval_seconds": 30})
    assert refused.status_code == 200  # the form again, with the error
    assert "must not exceed max_interval_seconds" in refused.content.decode()
    credential.refresh_from_db()
    assert (credential.min_interval_seconds, credential.max_interval_seconds) == (120, 300)

    saved = admin_client.post(url, {**form, "max_interval_seconds": 90})
    assert saved.status_code == 302
    credential.refresh_from_db()
    assert (credential.min_interval_seconds, credential.max_interval_seconds) == (60, 90)
    assert re.search(r'field-pace">.*?60-90 s', admin_client.get(url).content.decode(), re.S)


def test_a_staff_edit_keeps_what_the_engine_wrote_since_the_page_read_the_row(
    admin_client, monkeypatch
):
    """The sender writes the mailbox's counters and its next send between the admin's
    read of the row and its save: the save writes only the fields the form changed."""
    from outreach.mailboxes.admin import SmtpCredentialAdmin

    campaign = CampaignFactory()
    credential = campaign.credentials.get()
    engine = {"sent_count": 41, "daily_sent_count": 17, "next_send_earliest_at": AT}
    read = SmtpCredentialAdmin.get_object

    def read_then_a_send(self, request, object_id, from_field=None):
        obj = read(self, request, object_id, from_field)
        SmtpCredential.objects.filter(pk=object_id).update(**engine)
        return obj

    monkeypatch.setattr(SmtpCredentialAdmin, "get_object", read_then_a_send)
    url = reverse("admin:outreach_smtpcredential_change", args=[credential.pk])
    form = {"from_name": "Ops", "daily_limit": 75}
    form |= {"min_interval_seconds": credential.min_interval_seconds}
    form |= {"max_interval_seconds": credential.max_interval_seconds}
    saved = admin_client.post(url, form)

    assert saved.status_code == 302, saved.content[:2000]
    credential.refresh_from_db()
    assert (credential.from_name, credential.daily_limit) == ("Ops", 75)
    assert {name: getattr(credential, name) for name in engine} == engine
