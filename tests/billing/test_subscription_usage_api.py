"""GET /billing/subscription and GET /billing/usage."""

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from accounts.models import ApiRequestCount
from accounts.services import api_key_create
from billing.models import UsageRecord
from billing.periods import calendar_month
from billing.usage import usage_record_increment
from tests.accounts.factories import AccountFactory
from tests.conftest import client_for
from tests.foundation.test_errors import assert_envelope
from tests.plans.factories import PlanFactory
from tests.support.usage import usage_set

pytestmark = pytest.mark.django_db


def iso(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_subscription_of_a_free_account(api_client, account):
    usage_record_increment(account=account, by=3)
    start, end = calendar_month(timezone.now())

    response = api_client.get("/billing/subscription")

    assert response.status_code == 200
    assert response.json() == {
        "plan": {"slug": "free", "name": "Free", "tier": 0, "monthly_limit": 100},
        "current_period": {"start": iso(start), "end": iso(end), "sends_count": 3},
        "psp_subscription_id": None,
        "psp_customer_id": None,
    }


def test_subscription_of_a_subscribed_account(api_client, account):
    from plans.models import Plan

    now = timezone.now().replace(microsecond=0)
    start, end = now - timedelta(days=3), now + timedelta(days=27)
    account.plan = Plan.objects.get(slug="pro")
    account.psp_customer_id = "cus_sub_view"
    account.psp_subscription_id = "sub_sub_view"
    account.psp_subscription_status = "active"
    account.psp_current_period_start = start
    account.psp_current_period_end = end
    account.save()

    body = api_client.get("/billing/subscription").json()

    assert body == {
        "plan": {"slug": "pro", "name": "Pro", "tier": 2, "monthly_limit": 25000},
        "current_period": {"start": iso(start), "end": iso(end), "sends_count": 0},
        "psp_subscription_id": "sub_sub_view",
        "psp_customer_id": "cus_sub_view",
    }


def test_a_private_plan_is_shown_to_its_own_account_only(api_client, account, other_client):
    private = PlanFactory(
        slug="acme-custom", name="Acme custom", tier=4, monthly_limit=777_777, public=False
    )
    account.plan = private
    account.save()

    own = api_client.get("/billing/subscription").json()
    assert own["plan"] == {
        "slug": "acme-custom",
        "name": "Acme custom",
        "tier": 4,
        "monthly_limit": 777_777,
    }
    assert api_client.get("/billing/usage").json()["monthly_limit"] == 777_777

    # Nowhere else: not to another account, not in the public catalog.
    assert other_client.get("/billing/subscription").json()["plan"]["slug"] == "free"
    assert "acme-custom" not in [p["slug"] for p in other_client.get("/plans").json()]


def test_usage_current_history_and_by_client_kind(
    account, django_assert_max_num_queries, auth_queries
):
    direct = client_for(api_key_create(account=account, label="d").plaintext)
    mcp = client_for(api_key_create(account=account, label="m", client_kind="mcp").plaintext)
    # Fourteen past monthly records, oldest first; only the last 12 are history.
    now = timezone.now()
    current_start, current_end = calendar_month(now)
    month_starts = []
    cursor = current_start
    for _ in range(14):
        cursor = calendar_month(cursor - timedelta(days=1))[0]
        month_starts.append(cursor)
    for index, start in enumerate(month_starts):
        record = UsageRecord.objects.create(
            account=account, period_start=start, period_end=calendar_month(start)[1]
        )
        usage_set(record, index + 1)
    usage_record_increment(account=account, by=42)
    # Requests of an earlier period are not this period's traffic.
    ApiRequestCount.objects.create(
        account=account, client_kind="sdk", hour=month_starts[0], count=50
    )
    mcp.get("/plans")  # unauthenticated endpoint: not counted
    mcp.get("/billing/subscription")
    mcp.get("/billing/subscription")

    with django_assert_max_num_queries(auth_queries + 3):
        response = direct.get("/billing/usage")

    assert response.status_code == 200
    body = response.json()
    assert body["monthly_limit"] == 100
    assert body["current"] == {
        "period_start": iso(current_start),
        "period_end": iso(current_end),
        "sends_count": 42,
    }
    assert body["history"] == [
        {
            "period_start": iso(start),
            "period_end": iso(calendar_month(start)[1]),
            "sends_count": index + 1,
        }
        for index, start in list(enumerate(month_starts))[:12]
    ]
    # This request counts too: it is authenticated before the view runs.
    assert body["by_client_kind"] == {"direct": 1, "mcp": 2, "sdk": 0}


def test_usage_of_a_new_account_has_an_empty_history(api_client):
    body = api_client.get("/billing/usage").json()
    assert body["history"] == []
    assert body["current"]["sends_count"] == 0


def test_usage_is_per_account(api_client, account, other_account, other_client):
    usage_record_increment(account=other_account, by=9)
    assert api_client.get("/billing/usage").json()["current"]["sends_count"] == 0
    assert other_client.get("/billing/usage").json()["current"]["sends_count"] == 9
    other = AccountFactory()
    usage_record_increment(account=other, by=1)
    assert api_client.get("/billing/subscription").json()["current_period"]["sends_count"] == 0


def test_billing_views_need_a_key(anon_client):
    assert_envelope(anon_client.get("/billing/subscription"), 401, "authentication_required")
    assert_envelope(anon_client.get("/billing/usage"), 401, "authentication_required")
