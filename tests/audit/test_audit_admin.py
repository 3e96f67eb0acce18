"""Staff and the audit log (docs/audit.md): their changes in the admin are audited (actor
staff, username), and they read an account's events from the account's page."""

import pytest
from django.contrib.admin import helpers

from accounts.models import AuditEvent
from tests.accounts.factories import AccountFactory
from tests.outreach.factories import CampaignFactory, ContactFactory

pytestmark = pytest.mark.django_db


def _account_form(account, **changes):
    return {
        "email": account.email,
        "name": account.name,
        "plan": account.plan.pk,
        "api_keys-TOTAL_FORMS": "0",
        "api_keys-INITIAL_FORMS": "0",
        **changes,
    }


def test_a_staff_change_is_one_row_naming_the_fields(admin_client, admin_user, used_values):
    account = AccountFactory(name="Before")
    used_values.add("Renamed by staff")
    response = admin_client.post(
        f"/admin/accounts/account/{account.pk}/change/",
        _account_form(account, name="Renamed by staff"),
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    [row] = AuditEvent.objects.all()
    assert (row.account_id, row.action, row.resource_type, row.resource_id) == (
        account.pk,
        "account.update",
        "account",
        str(account.pk),
    )
    assert (row.actor_type, row.actor_id, row.actor_name) == (
        "staff",
        str(admin_user.pk),
        admin_user.username,
    )
    assert row.changes == ["name"]
    assert row.request_id == response["X-Request-Id"]


def test_a_staff_deletion_is_one_row_per_deleted_row(admin_client):
    contacts = [ContactFactory(), ContactFactory()]
    response = admin_client.post(
        "/admin/outreach/contact/",
        {
            "action": "delete_selected",
            "post": "yes",
            helpers.ACTION_CHECKBOX_NAME: [str(c.pk) for c in contacts],
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    rows = AuditEvent.objects.order_by("resource_id")
    assert sorted((r.account_id, r.resource_id) for r in rows) == sorted(
        (c.account_id, str(c.pk)) for c in contacts
    )
    assert {(r.action, r.actor_type) for r in rows} == {("contact.delete", "staff")}


def test_a_staff_action_is_one_row_per_selected_row(admin_client):
    account = AccountFactory(email_verified_at=None)
    response = admin_client.post(
        "/admin/accounts/account/",
        {"action": "email_mark_verified", helpers.ACTION_CHECKBOX_NAME: [str(account.pk)]},
    )
    assert response.status_code == 302
    [row] = AuditEvent.objects.all()
    assert (row.action, row.account_id, row.actor_type) == (
        "account.email_mark_verified",
        account.pk,
        "staff",
    )


def test_a_change_that_fails_validation_leaves_no_row(admin_client):
    account = AccountFactory()
    response = admin_client.post(
        f"/admin/accounts/account/{account.pk}/change/", _account_form(account, email="nope")
    )
    assert response.status_code == 200  # the form again, with its error
    assert not AuditEvent.objects.exists()


def test_staff_read_an_accounts_events_from_its_page(admin_client, api_client, account):
    other = AccountFactory()
    campaign = CampaignFactory(account=account)
    api_client.patch(f"/campaigns/{campaign.pk}", {"name": "Mine"}, format="json")
    admin_client.post(
        f"/admin/accounts/account/{other.pk}/change/", _account_form(other, name="Theirs")
    )
    page = admin_client.get(f"/admin/accounts/account/{account.pk}/change/").content.decode()
    link = f"/admin/accounts/auditevent/?account__id__exact={account.pk}"
    assert link in page.replace("&amp;", "&")

    listing = admin_client.get(link)

    assert listing.status_code == 200
    text = listing.content.decode()
    assert "campaign.update" in text and "account.update" not in text
    row = AuditEvent.objects.get(account=account)
    detail = admin_client.get(f"/admin/accounts/auditevent/{row.pk}/change/")
    assert detail.status_code == 200
    assert b"Save" not in detail.content
    assert admin_client.get("/admin/accounts/auditevent/add/").status_code == 403
    assert admin_client.post(f"/admin/accounts/auditevent/{row.pk}/delete/").status_code == 403
