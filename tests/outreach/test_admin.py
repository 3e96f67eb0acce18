"""Back office: every outreach model lists, opens, searches by email, shows no secret."""

import pytest
from django.urls import reverse
from django.utils import timezone

from outreach import enrollments
from outreach.models.campaigns import CampaignStep
from outreach.models.contacts import ContactImport, Suppression
from outreach.models.sending import Message
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


def test_campaign_page_shows_variants_inline_and_stats_per_variant(admin_client, rows):
    campaign, enrollment = rows["campaign"], rows["enrollment"]
    CampaignStep.objects.filter(campaign=campaign, position=2).update(
        variants=[{"subject": "Other angle", "body_text": "Variant <b>B</b> body", "body_html": ""}]
    )
    Message.objects.create(
        account=campaign.account,
        enrollment=enrollment,
        step=2,
        variant="B",
        message_id="admin-b@sender.example",
        to_email=enrollment.contact.email,
        sent_at=timezone.now(),
    )
    enrollments.variant_count(campaign.pk, 2, "B", sent=1)  # as the sender counts it

    page = admin_client.get(reverse("admin:outreach_campaign_change", args=[campaign.pk]))

    content = page.content.decode()
    assert "Other angle" in content
    assert "Variant &lt;b&gt;B&lt;/b&gt; body" in content  # escaped
    assert "Stats per step and variant" in content
    assert "<td>2</td><td>B</td><td>1</td><td>0</td><td>0</td><td>0</td>" in content


def test_enrollments_filter_by_stopped(admin_client, rows):
    campaign = rows["campaign"]
    stopped = EnrollmentFactory(campaign=campaign, status="stopped", stop_reason="domain_reply")

    url = reverse("admin:outreach_enrollment_changelist")
    page = admin_client.get(url, {"status__exact": "stopped"})
    assert page.status_code == 200
    assert list(page.context["cl"].result_list) == [stopped]
    page = admin_client.get(url, {"stop_reason__exact": "domain_reply"})
    assert list(page.context["cl"].result_list) == [stopped]
    assert (
        admin_client.get(reverse("admin:outreach_enrollment_change", args=[stopped.pk])).status_code
        == 200
    )


def test_an_oauth_mailbox_shows_its_status_and_how_to_re_authorize(admin_client, account):
    credential = CredentialFactory(
        account=account,
        from_email="owner@gmail.example",
        smtp_password="",
        auth_method="oauth_google",
        oauth_status="reauthorization_required",
        oauth_refresh_token="rt-plaintext-xyz",
        oauth_access_token="at-plaintext-xyz",
    )
    changelist = admin_client.get(
        reverse("admin:outreach_smtpcredential_changelist"),
        {"oauth_status": "reauthorization_required"},
    )
    assert "owner@gmail.example" in changelist.content.decode()
    page = admin_client.get(reverse("admin:outreach_smtpcredential_change", args=[credential.pk]))
    html = page.content.decode()
    assert "Re-authorization required" in html
    assert 'POST /smtp_credentials/oauth</code> <code>{"provider": "google"}' in html
    assert "rt-plaintext-xyz" not in html and "at-plaintext-xyz" not in html

    CredentialFactory(account=account, from_email="pw@example.com")
    connected = CredentialFactory(
        account=account, auth_method="oauth_microsoft", oauth_status="connected"
    )
    page = admin_client.get(reverse("admin:outreach_smtpcredential_change", args=[connected.pk]))
    assert "Connected with Microsoft" in page.content.decode()
