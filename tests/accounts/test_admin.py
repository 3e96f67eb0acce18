import pytest
from django.utils import timezone

from accounts.models import ApiKey
from accounts.services import api_key_create
from tests.accounts.factories import AccountFactory

pytestmark = pytest.mark.django_db


def test_account_page_shows_keys_inline_without_hashes(admin_client):
    account = AccountFactory(psp_customer_id="cus_123")
    active = api_key_create(account=account, label="Active one", client_kind="mcp")
    revoked = api_key_create(account=account, label="Revoked one")
    ApiKey.objects.filter(pk=revoked.api_key.pk).update(revoked_at=timezone.now())
    page = admin_client.get(f"/admin/accounts/account/{account.pk}/change/").content.decode()
    assert "Active one" in page and "Revoked one" in page
    assert active.api_key.prefix in page
    assert "cus_123" in page
    for issued in (active, revoked):
        assert issued.api_key.key_hash not in page
        assert issued.plaintext[12:] not in page


@pytest.mark.parametrize(
    "query, found",
    [
        ("findme@example.com", True),
        ("FINDME", True),
        ("cus_findme", True),
        ("sub_findme", True),
        ("nobody", False),
    ],
)
def test_accounts_are_searchable(admin_client, query, found):
    AccountFactory(
        email="findme@example.com", psp_customer_id="cus_findme", psp_subscription_id="sub_findme"
    )
    AccountFactory(email="else@example.com")
    page = admin_client.get("/admin/accounts/account/", {"q": query}).content.decode()
    assert ("findme@example.com" in page) is found
    assert "else@example.com" not in page


def test_accounts_filter_by_plan(admin_client):
    account = AccountFactory(email="onfree@example.com")
    page = admin_client.get("/admin/accounts/account/", {"plan__id__exact": account.plan_id})
    assert "onfree@example.com" in page.content.decode()


def test_provider_ids_are_read_only_and_the_plan_is_editable(admin_client):
    account = AccountFactory(psp_customer_id="cus_keep")
    response = admin_client.post(
        f"/admin/accounts/account/{account.pk}/change/",
        {
            "email": account.email,
            "name": "Renamed",
            "plan": account.plan.pk,
            "psp_customer_id": "cus_hacked",
            "api_keys-TOTAL_FORMS": "0",
            "api_keys-INITIAL_FORMS": "0",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    account.refresh_from_db()
    assert account.name == "Renamed"
    assert account.psp_customer_id == "cus_keep"


def test_accounts_are_not_added_in_the_admin(admin_client):
    assert admin_client.get("/admin/accounts/account/add/").status_code == 403


def test_idempotency_records_are_read_only(admin_client):
    assert admin_client.get("/admin/accounts/idempotencyrecord/").status_code == 200
    assert admin_client.get("/admin/accounts/idempotencyrecord/add/").status_code == 403
