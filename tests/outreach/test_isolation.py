"""Every outreach endpoint: another account's resource is the same 404 as a missing one,
and nothing of it is read or changed. Ids inside bodies: see each resource's tests
(credential_ids, campaign_id, contact_ids are validation_failed for foreign ids)."""

import pytest

from outreach.models.campaigns import Campaign
from outreach.models.contacts import Contact, ContactImport
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Enrollment
from tests.outreach.factories import CampaignFactory, EnrollmentFactory
from tests.outreach.helpers import assert_error

pytestmark = pytest.mark.django_db

ENDPOINTS = [
    ("get", "/smtp_credentials/{credential}", "credential_not_found"),
    ("patch", "/smtp_credentials/{credential}", "credential_not_found"),
    ("delete", "/smtp_credentials/{credential}", "credential_not_found"),
    ("get", "/campaigns/{campaign}", "campaign_not_found"),
    ("patch", "/campaigns/{campaign}", "campaign_not_found"),
    ("delete", "/campaigns/{campaign}", "campaign_not_found"),
    ("post", "/campaigns/{campaign}/dispatch", "campaign_not_found"),
    ("post", "/campaigns/{campaign}/pause", "campaign_not_found"),
    ("post", "/campaigns/{campaign}/resume", "campaign_not_found"),
    ("get", "/campaigns/{campaign}/enrollments", "campaign_not_found"),
    ("get", "/contacts/{contact}", "contact_not_found"),
    ("patch", "/contacts/{contact}", "contact_not_found"),
    ("delete", "/contacts/{contact}", "contact_not_found"),
    ("get", "/contact_imports/{contact_import}", "contact_import_not_found"),
]


@pytest.fixture
def theirs(other_account):
    campaign = CampaignFactory(account=other_account, status="active")
    enrollment = EnrollmentFactory(campaign=campaign)
    contact_import = ContactImport.objects.create(
        account=other_account, source_format="csv", source_data=b"email\n"
    )
    return {
        "credential": campaign.credentials.get().pk,
        "campaign": campaign.pk,
        "contact": enrollment.contact_id,
        "contact_import": contact_import.pk,
    }


def snapshot():
    return [
        list(model.objects.order_by("pk").values())
        for model in (SmtpCredential, Campaign, Contact, ContactImport, Enrollment)
    ]


@pytest.mark.parametrize(("method", "template", "code"), ENDPOINTS)
def test_foreign_ids_are_404_and_untouched(api_client, theirs, method, template, code):
    before = snapshot()
    body = {"name": "x", "all_pending": True, "first_name": "x", "daily_limit": 1}
    response = getattr(api_client, method)(template.format(**theirs), body, format="json")
    assert_error(response, 404, code)
    assert snapshot() == before


@pytest.mark.parametrize(("method", "template", "code"), ENDPOINTS)
@pytest.mark.parametrize("ref", ["not-a-uuid", "5f0c4d1e-0000-4000-8000-000000000001"])
def test_unknown_and_malformed_ids_are_the_same_404(api_client, method, template, code, ref):
    url = template.format(credential=ref, campaign=ref, contact=ref, contact_import=ref)
    assert_error(getattr(api_client, method)(url, {}, format="json"), 404, code)


def test_lists_show_only_own_resources(api_client, account, theirs):
    mine = CampaignFactory(account=account)
    EnrollmentFactory(campaign=mine)
    ContactImport.objects.create(account=account, source_format="csv", source_data=b"")
    for url, count in [
        ("/smtp_credentials", 1),
        ("/campaigns", 1),
        ("/contacts", 1),
        ("/contact_imports", 1),
        (f"/campaigns/{mine.pk}/enrollments", 1),
    ]:
        response = api_client.get(url)
        assert response.status_code == 200
        assert len(response.json()) == count, url
        ids = {item["id"] for item in response.json()}
        assert not ids & {str(v) for v in theirs.values()}


def test_starting_after_a_foreign_id_is_rejected(api_client, theirs):
    response = api_client.get(f"/contacts?starting_after={theirs['contact']}")
    assert_error(response, 422, "validation_failed")


def test_contact_email_filter_does_not_leak(api_client, theirs):
    email = Contact.objects.get(pk=theirs["contact"]).email
    assert api_client.get(f"/contacts?email={email}").json() == []


@pytest.mark.parametrize(
    "url",
    [
        "/smtp_credentials",
        "/campaigns",
        "/contacts",
        "/contact_imports",
        "/outreaches",
        "/campaigns/5f0c4d1e-0000-4000-8000-000000000002/enrollments",
    ],
)
def test_every_endpoint_needs_a_key(anon_client, url):
    method = "post" if url == "/outreaches" else "get"
    assert_error(getattr(anon_client, method)(url), 401, "authentication_required")
