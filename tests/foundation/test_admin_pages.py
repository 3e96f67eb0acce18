"""Every admin page staff can reach loads: each registered model's list (plain, searched,
filtered by each of its list filters' first choice), its change page and, where staff
may add, its add page. Guards the admin's queries on both databases and with
server-side parameter binding (PostgreSQL)."""

import re
from html import unescape

import pytest
from django.contrib import admin
from django.urls import reverse

from accounts.services import api_key_create
from billing.usage import usage_record_increment
from outreach.models.domains import SenderDomainCheck
from tests.intake.factories import sent_enrollment
from tests.webhooks.factories import WebhookDeliveryFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def some_of_everything():
    enrollment = sent_enrollment(steps_sent=2)
    account = enrollment.campaign.account
    api_key_create(account=account, label="admin pages")
    usage_record_increment(account=account)
    WebhookDeliveryFactory(webhook__account=account)
    SenderDomainCheck.objects.create(
        credential=enrollment.campaign.credentials.first(),
        domain="example.com",
        status="error",
        findings=[{"code": "dmarc_missing", "level": "error", "message": "No <DMARC>."}],
        checked_at=enrollment.created_at,
    )


def _admins():
    return sorted(
        ((model, model_admin) for model, model_admin in admin.site._registry.items()),
        key=lambda pair: pair[0]._meta.label,
    )


@pytest.mark.parametrize(
    ("model", "model_admin"), _admins(), ids=lambda v: getattr(v, "__name__", "")
)
def test_every_admin_page_loads(admin_client, some_of_everything, model, model_admin):
    opts = model._meta
    changelist = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
    response = admin_client.get(changelist)
    assert response.status_code == 200, changelist
    if model_admin.search_fields:
        assert admin_client.get(changelist, {"q": "example"}).status_code == 200
    # Each list filter's first choice, as staff would click it.
    links = set(re.findall(r'href="(\?[^"]+)"', response.content.decode()))
    for link in sorted(links)[:20]:
        assert admin_client.get(changelist + unescape(link)).status_code == 200, link
    obj = model._default_manager.first()
    if obj is not None:
        change = reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.pk])
        assert admin_client.get(change).status_code == 200, change
    request = admin_client.get(changelist).wsgi_request
    if model_admin.has_add_permission(request):
        add = reverse(f"admin:{opts.app_label}_{opts.model_name}_add")
        assert admin_client.get(add).status_code == 200, add


def _columns(page: str) -> list[str]:
    return re.findall(r'<th scope="col" class="[^"]*column-(\w+)', page)


@pytest.mark.parametrize(
    ("url", "health"),
    [
        ("admin:outreach_smtpcredential_changelist", ["disabled_at", "last_error_at"]),
        ("admin:webhooks_webhookdelivery_changelist", ["delivered_at", "status_code", "error"]),
        ("admin:webhooks_webhook_changelist", ["disabled_at", "consecutive_failures"]),
    ],
)
def test_list_pages_show_health_first(admin_client, some_of_everything, url, health):
    # Health columns right after the row's name (or time), before account and settings,
    # so a narrow window (1400 px) does not push them out of sight.
    columns = _columns(admin_client.get(reverse(url)).content.decode())
    assert columns[1 : 1 + len(health)] == health, columns


# What staff may do on each page of the project's apps: (add, change, delete). Nothing
# is added but plans; a view-only page has no Save; some rows are never deleted here.
STAFF_MAY = {
    "accounts.Account": (False, True, True),
    "accounts.AuditEvent": (False, False, False),
    "accounts.IdempotencyRecord": (False, False, True),
    "billing.BillingAccount": (False, True, False),
    "billing.PspEvent": (False, False, True),
    "billing.UsageRecord": (False, True, True),
    "outreach.Approval": (False, False, False),
    "outreach.BlocklistEntry": (False, True, True),
    "outreach.Campaign": (False, True, True),
    "outreach.Contact": (False, True, True),
    "outreach.ContactImport": (False, True, True),
    "outreach.Enrollment": (False, True, True),
    "outreach.Reply": (False, True, False),
    "outreach.SenderDomainCheck": (False, True, True),
    "outreach.SmtpCredential": (False, True, True),
    "outreach.Suppression": (False, True, True),
    "outreach.UnmatchedReport": (False, False, True),
    "plans.Plan": (True, True, True),
    "webhooks.DeliveryJob": (False, False, False),
    "webhooks.Webhook": (False, False, False),
    "webhooks.WebhookDelivery": (False, False, False),
}


def test_what_staff_may_do_on_each_page(admin_client):
    request = admin_client.get(reverse("admin:index")).wsgi_request
    may = {
        model._meta.label: (
            model_admin.has_add_permission(request),
            model_admin.has_change_permission(request),
            model_admin.has_delete_permission(request),
        )
        for model, model_admin in admin.site._registry.items()
        if model._meta.app_label in ("accounts", "billing", "outreach", "plans", "webhooks")
    }
    assert may == STAFF_MAY
