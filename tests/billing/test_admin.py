"""Staff, in the admin: assign any plan (a private one included) to an account,
see its usage records, and the provider events received."""

import pytest

from accounts.models import Account
from billing.models import PspEvent, UsageRecord
from billing.usage import usage_record_current, usage_record_increment
from tests.accounts.factories import AccountFactory
from tests.plans.factories import PlanFactory

pytestmark = pytest.mark.django_db


def test_staff_assign_a_private_plan(admin_client):
    account = AccountFactory()
    private = PlanFactory(slug="acme-private", public=False, psp_price_id=None)

    page = admin_client.get(f"/admin/billing/billingaccount/{account.pk}/change/")
    assert page.status_code == 200
    assert "acme-private" in page.content.decode()  # offered, though private

    response = admin_client.post(
        f"/admin/billing/billingaccount/{account.pk}/change/",
        {
            "plan": private.pk,
            "usage_records-TOTAL_FORMS": "0",
            "usage_records-INITIAL_FORMS": "0",
            "usage_records-MIN_NUM_FORMS": "0",
            "usage_records-MAX_NUM_FORMS": "1000",
        },
    )

    assert response.status_code == 302, response.content.decode()[:2000]
    account = Account.objects.get(pk=account.pk)
    assert account.plan == private
    assert account.email  # nothing else of the account was touched


def test_usage_records_are_visible_per_account(admin_client):
    account = AccountFactory(email="metered@example.com")
    usage_record_increment(account=account, by=37)
    other = AccountFactory()
    usage_record_increment(account=other, by=5)

    page = admin_client.get(f"/admin/billing/billingaccount/{account.pk}/change/").content.decode()
    assert "37" in page

    listing = admin_client.get("/admin/billing/usagerecord/", {"q": "metered@"})
    assert listing.status_code == 200
    assert listing.context["cl"].result_count == 1
    [record] = listing.context["cl"].result_list
    assert record == UsageRecord.objects.get(account=account)


def test_an_accounts_deletion_page_lists_its_usage_records_with_their_count(admin_client):
    account = AccountFactory()
    usage_record_increment(account=account, by=37)
    record = usage_record_current(account=account)

    page = admin_client.get(f"/admin/accounts/account/{account.pk}/delete/")

    assert page.status_code == 200
    assert str(record) in page.content.decode()  # "<account> <period start>: 37"


def test_the_events_received_are_listed(admin_client):
    PspEvent.objects.create(
        id="evt_admin_1",
        type="invoice.paid",
        outcome="unknown_customer",
        payload={"id": "evt_admin_1"},
    )
    listing = admin_client.get("/admin/billing/pspevent/")
    assert listing.status_code == 200
    assert "evt_admin_1" in listing.content.decode()


def test_the_billing_pages_are_staff_only(client):
    account = AccountFactory()
    response = client.get(f"/admin/billing/billingaccount/{account.pk}/change/")
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]
