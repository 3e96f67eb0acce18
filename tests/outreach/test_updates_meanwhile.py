"""A PATCH of a row the engine writes too (a contact, a campaign; the mailbox's in
test_credentials.py): what the engine recorded between the request's read of the row and
its write stays (config.db.rows.row_change)."""

import re
import threading
from datetime import UTC, datetime

import pytest
from django.contrib import admin
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from accounts.models import Account
from config.db.rows import row_change
from outreach.campaigns.api import CampaignViewSet
from outreach.contacts.api import ContactViewSet
from outreach.mailboxes.api import CredentialViewSet
from outreach.models.campaigns import Campaign
from outreach.models.contacts import Contact, Suppression
from outreach.models.mailboxes import SmtpCredential
from tests.outreach.factories import CampaignFactory, ContactFactory, CredentialFactory
from tests.outreach.helpers import assert_error

pytestmark = pytest.mark.django_db

AT = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)


def engine_writes_after_the_read(monkeypatch, viewset, model, **columns):
    """The view reads its row, then the engine writes `columns` to it, then the view
    goes on (the race a real request runs)."""
    read = viewset.get_object

    def read_then_write(self):
        obj = read(self)
        model.objects.filter(pk=obj.pk).update(**columns)
        return obj

    monkeypatch.setattr(viewset, "get_object", read_then_write)


def test_a_contact_unsubscribed_meanwhile_stays_unsubscribed(api_client, account, monkeypatch):
    contact = ContactFactory(account=account, first_name="Ada")
    engine_writes_after_the_read(monkeypatch, ContactViewSet, Contact, unsubscribed_at=AT)

    response = api_client.patch(f"/contacts/{contact.pk}", {"first_name": "Grace"}, format="json")

    assert response.status_code == 200, response.content
    assert response.json()["first_name"] == "Grace"
    assert response.json()["unsubscribed_at"].startswith("2026-03-02T10:00:00")
    contact.refresh_from_db()
    assert (contact.first_name, contact.unsubscribed_at) == ("Grace", AT)


def test_a_new_address_brings_its_suppression_and_keeps_a_bounce_recorded_meanwhile(
    api_client, account, monkeypatch
):
    contact = ContactFactory(account=account, email="ada@example.com")
    Suppression.objects.create(
        account=account, email_lower="grace@example.com", reason="unsubscribed", at=AT
    )
    engine_writes_after_the_read(monkeypatch, ContactViewSet, Contact, bounced_at=AT)

    response = api_client.patch(
        f"/contacts/{contact.pk}", {"email": "Grace@Example.com"}, format="json"
    )

    assert response.status_code == 200, response.content
    contact.refresh_from_db()
    assert (contact.email, contact.email_lower) == ("Grace@example.com", "grace@example.com")
    assert (contact.unsubscribed_at, contact.bounced_at) == (AT, AT)


def test_a_campaign_paused_meanwhile_stays_paused(api_client, account, monkeypatch):
    campaign = CampaignFactory(account=account, status=Campaign.Status.ACTIVE, name="Spring")
    engine_writes_after_the_read(
        monkeypatch,
        CampaignViewSet,
        Campaign,
        status=Campaign.Status.PAUSED,
        paused_reason=Campaign.PausedReason.ALL_CREDENTIALS_DISABLED,
        paused_at=AT,
    )

    response = api_client.patch(f"/campaigns/{campaign.pk}", {"name": "Summer"}, format="json")

    assert response.status_code == 200, response.content
    assert (response.json()["name"], response.json()["status"]) == ("Summer", "paused")
    campaign.refresh_from_db()
    assert (campaign.name, campaign.status, campaign.paused_at) == ("Summer", "paused", AT)
    assert campaign.paused_reason == Campaign.PausedReason.ALL_CREDENTIALS_DISABLED


def test_row_change_writes_the_columns_changed_and_nothing_when_none_did(account):
    contact = ContactFactory(account=account, fields={"plan": "pro"})

    def change(current):
        current.fields["plan"] = "team"  # a JSON value changed in place counts
        current.company = "Analytical Engines"

    with CaptureQueriesContext(connection) as queries:
        changed = row_change(contact, change)
    select = next(q["sql"] for q in queries if q["sql"].startswith("SELECT"))
    assert select.endswith("FOR NO KEY UPDATE")
    update = next(q["sql"] for q in queries if q["sql"].startswith("UPDATE"))
    set_clause = update.split(" SET ", 1)[1].split(" WHERE ", 1)[0]
    assert set(re.findall(r'"(\w+)" = ', set_clause)) == {"company", "fields", "updated_at"}
    assert changed.fields == {"plan": "team"} and changed.company == "Analytical Engines"

    with CaptureQueriesContext(connection) as queries:
        row_change(changed, lambda current: setattr(current, "company", "Analytical Engines"))
    assert not [q for q in queries if q["sql"].startswith("UPDATE")]


@pytest.mark.parametrize(
    ("name", "model", "edit", "meanwhile"),
    [
        (
            "contact",
            Contact,
            {"first_name": "Grace", "last_name": "Hopper", "company": ""},
            {"unsubscribed_at": AT, "bounced_at": AT},
        ),
        (
            "campaign",
            Campaign,
            {"name": "Summer"},
            {"status": "paused", "paused_reason": "all_credentials_disabled", "paused_at": AT},
        ),
        (
            "account",
            Account,
            {"email": "grace@example.com", "name": "Grace"},
            {"psp_subscription_status": "past_due", "psp_customer_id": "cus_123"},
        ),
    ],
)
def test_a_staff_edit_keeps_what_was_recorded_since_the_page_read_the_row(
    admin_client, account, monkeypatch, name, model, edit, meanwhile
):
    """The admin's save writes only the fields its form changed (config.admin_base)."""
    if model is Contact:
        row = ContactFactory(account=account)
    elif model is Campaign:
        row = CampaignFactory(account=account, status=Campaign.Status.ACTIVE)
    else:
        row = account
    model_admin = admin.site._registry[model]
    read = type(model_admin).get_object

    def read_then_write(self, request, object_id, from_field=None):
        obj = read(self, request, object_id, from_field)
        model.objects.filter(pk=object_id).update(**meanwhile)
        return obj

    monkeypatch.setattr(type(model_admin), "get_object", read_then_write)
    app = model._meta.app_label
    url = reverse(f"admin:{app}_{model._meta.model_name}_change", args=[row.pk])

    # The inlines' empty management forms; the account's plan as it is.
    inlines = {"contact": [], "campaign": ["steps"], "account": ["api_keys"]}[name]
    form = {f"{prefix}-{part}_FORMS": "0" for prefix in inlines for part in ("TOTAL", "INITIAL")}
    if model is Account:
        form["plan"] = account.plan.pk
    saved = admin_client.post(url, {**form, **edit})

    assert saved.status_code == 302, saved.content[:3000]
    row.refresh_from_db()
    assert {field: getattr(row, field) for field in meanwhile} == meanwhile
    changed = {field: value for field, value in edit.items() if value}
    assert {field: getattr(row, field) for field in changed} == changed


def _delete_elsewhere(model, pk) -> None:
    """The DELETE of another request: its own connection (its thread's), committed."""
    try:
        model.objects.filter(pk=pk).delete()
    finally:
        connection.close()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("path", "model", "code", "body"),
    [
        ("contacts", Contact, "contact_not_found", {"first_name": "Grace"}),
        ("campaigns", Campaign, "campaign_not_found", {"name": "Summer"}),
        ("smtp_credentials", SmtpCredential, "credential_not_found", {"from_name": "Ops"}),
    ],
)
def test_a_row_deleted_meanwhile_is_not_found_and_not_inserted_again(
    api_client, account, monkeypatch, path, model, code, body
):
    """The DELETE of another request lands between the PATCH's read and its write: the
    PATCH answers the resource's 404 (a save of the row it read would have inserted it
    again). The DELETE commits on a connection of its own, as another request's would:
    made on the PATCH's connection, it would be rolled back with the PATCH's transaction
    (config.api.audit) and prove nothing."""
    if model is Contact:
        row = ContactFactory(account=account)
    elif model is Campaign:
        row = CampaignFactory(account=account)
    else:
        row = CredentialFactory(account=account)
    viewset = {Contact: ContactViewSet, Campaign: CampaignViewSet}.get(model, CredentialViewSet)
    read = viewset.get_object

    def read_then_deleted(self):
        obj = read(self)
        other_request = threading.Thread(target=_delete_elsewhere, args=(model, obj.pk))
        other_request.start()
        other_request.join(30)
        assert not other_request.is_alive()
        return obj

    monkeypatch.setattr(viewset, "get_object", read_then_deleted)

    response = api_client.patch(f"/{path}/{row.pk}", body, format="json")

    assert_error(response, 404, code)
    assert not model.objects.filter(pk=row.pk).exists()
