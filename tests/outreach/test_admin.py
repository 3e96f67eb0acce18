"""Back office: every outreach model lists, opens, searches by email, shows no secret."""

import pytest
from django.urls import reverse
from django.utils import timezone

from outreach.models import ContactImport, Suppression
from tests.outreach.factories import CampaignFactory, CredentialFactory, EnrollmentFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def rows(account):
    credential = CredentialFactory(
        account=account,
        smtp_password="smtp-plaintext-xyz",
        imap_host="imap.example.com",
        imap_password="imap-plaintext-xyz",
        relay_provider="mailgun",
        relay_signing_key="relay-plaintext-xyz",
    )
    campaign = CampaignFactory(account=account, with_steps=2, with_credential=False)
    campaign.credentials.add(credential)
    enrollment = EnrollmentFactory(campaign=campaign)
    contact_import = ContactImport.objects.create(
        account=account, source_format="csv", source_data=b"email\nsecret-row@example.org\n"
    )
    suppression = Suppression.objects.create(
        account=account, email_lower="gone@example.org", reason="unsubscribed", at=timezone.now()
    )
    return {
        "suppression": suppression,
        "smtpcredential": credential,
        "campaign": campaign,
        "contact": enrollment.contact,
        "enrollment": enrollment,
        "contactimport": contact_import,
    }


@pytest.mark.parametrize(
    "model",
    ["smtpcredential", "campaign", "contact", "enrollment", "contactimport", "suppression"],
)
def test_changelist_and_change_page(admin_client, rows, model):
    changelist = admin_client.get(reverse(f"admin:outreach_{model}_changelist"))
    assert changelist.status_code == 200
    change = admin_client.get(reverse(f"admin:outreach_{model}_change", args=[rows[model].pk]))
    assert change.status_code == 200
    for page in (changelist, change):
        assert b"plaintext-xyz" not in page.content
    # Read-mostly: nothing is added from the admin.
    assert admin_client.get(reverse(f"admin:outreach_{model}_add")).status_code == 403


def test_campaign_page_shows_steps_inline(admin_client, rows):
    page = admin_client.get(reverse("admin:outreach_campaign_change", args=[rows["campaign"].pk]))
    assert b"Step 2 for {{company}}" in page.content


def test_search_by_email(admin_client, rows):
    contact = rows["contact"]
    for model in ("contact", "enrollment"):
        page = admin_client.get(
            reverse(f"admin:outreach_{model}_changelist"), {"q": contact.email.upper()}
        )
        assert contact.email.encode() in page.content
        missing = admin_client.get(
            reverse(f"admin:outreach_{model}_changelist"), {"q": "nobody@nowhere.example"}
        )
        assert contact.email.encode() not in missing.content
    credential = rows["smtpcredential"]
    page = admin_client.get(
        reverse("admin:outreach_smtpcredential_changelist"), {"q": credential.from_email}
    )
    assert credential.from_email.encode() in page.content


def test_credential_edit_keeps_secrets(admin_client, rows):
    credential = rows["smtpcredential"]
    url = reverse("admin:outreach_smtpcredential_change", args=[credential.pk])
    form = {"daily_limit": 75, "from_name": "Ops"}
    form |= {"min_interval_seconds": 120, "max_interval_seconds": 300}
    response = admin_client.post(url, form)
    assert response.status_code == 302, response.content[:2000]
    credential.refresh_from_db()
    assert credential.daily_limit == 75
    assert credential.smtp_password == "smtp-plaintext-xyz"
