"""GET /audit_events (docs/audit.md): the account's rows, newest first, in cursor pages,
with their filters; unknown or malformed parameters are 422 naming them."""

from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.audit import audit_events_prune
from accounts.models import AuditEvent
from accounts.services import api_key_create
from accounts.tasks import audit_events_prune as audit_events_prune_task
from outreach.models.campaigns import Campaign
from tests.accounts.factories import AccountFactory
from tests.outreach.factories import CampaignFactory
from tests.outreach.helpers import assert_error

pytestmark = pytest.mark.django_db


def _rows(response) -> list[tuple[str, str]]:
    assert response.status_code == 200, response.content
    return [(e["action"], e["resource"]["id"]) for e in response.json()]


def test_it_lists_the_accounts_events_newest_first(api_client, account, api_key, other_client):
    campaign = CampaignFactory(account=account, status=Campaign.Status.ACTIVE)
    api_client.patch(f"/campaigns/{campaign.pk}", {"name": "One"}, format="json")
    api_client.post(f"/campaigns/{campaign.pk}/pause")
    other_client.post("/api_keys", {"label": "theirs"}, format="json")

    response = api_client.get("/audit_events")

    assert _rows(response) == [
        ("campaign.pause", str(campaign.pk)),
        ("campaign.update", str(campaign.pk)),
    ]
    event = response.json()[1]
    assert event["actor"] == {
        "type": "api_key",
        "id": str(api_key.api_key.pk),
        "prefix": api_key.api_key.prefix,
        "client_kind": "direct",
    }
    assert event["resource"] == {"type": "campaign", "id": str(campaign.pk)}
    assert event["changes"] == ["name"]
    assert event["ip"] == "127.0.0.1"
    assert event["idempotency_key"] is None
    assert event["occurred_at"].endswith("Z")
    assert set(event) == {
        "id", "occurred_at", "actor", "action", "resource", "request_id",
        "idempotency_key", "ip", "changes",
    }  # fmt: skip


def test_filters(api_client, account, api_key):
    second = api_key_create(account=account, label="second")
    campaign = CampaignFactory(account=account)
    other = CampaignFactory(account=account, status=Campaign.Status.ACTIVE)
    api_client.patch(f"/campaigns/{campaign.pk}", {"name": "A"}, format="json")
    api_client.patch(f"/campaigns/{other.pk}", {"name": "B"}, format="json")
    from rest_framework.test import APIClient

    APIClient(HTTP_AUTHORIZATION=f"Bearer {second.plaintext}").post(f"/campaigns/{other.pk}/pause")
    AuditEvent.objects.filter(resource_id=str(campaign.pk)).update(
        created_at=timezone.now() - timedelta(days=2)
    )
    since = (timezone.now() - timedelta(days=1)).isoformat().replace("+00:00", "Z")

    def get(**params):
        return _rows(api_client.get("/audit_events", params))

    assert get(api_key_id=str(second.api_key.pk)) == [("campaign.pause", str(other.pk))]
    assert get(resource_id=str(campaign.pk)) == [("campaign.update", str(campaign.pk))]
    assert get(action="campaign.update", resource_type="campaign") == [
        ("campaign.update", str(other.pk)),
        ("campaign.update", str(campaign.pk)),
    ]
    assert len(get(since=since)) == 2
    assert get(resource_type="webhook") == []
    # `since` is inclusive: an event at that very instant is listed.
    at = AuditEvent.objects.get(resource_id=str(campaign.pk)).created_at
    assert len(get(since=at.isoformat())) == 3


def test_cursor_pages(api_client, account):
    campaign = CampaignFactory(account=account)
    for name in ("a", "b", "c"):
        api_client.patch(f"/campaigns/{campaign.pk}", {"name": name}, format="json")
    first = api_client.get("/audit_events", {"limit": 2})
    assert len(first.json()) == 2 and 'rel="next"' in first["Link"]
    last_id = first.json()[-1]["id"]
    second = api_client.get("/audit_events", {"limit": 2, "starting_after": last_id})
    assert len(second.json()) == 1 and "Link" not in second


@pytest.mark.parametrize(
    "params, field",
    [
        ({"actor": "x"}, "actor"),
        ({"api_key_id": "not-a-uuid"}, "api_key_id"),
        ({"since": "yesterday"}, "since"),
        ({"limit": "0"}, "limit"),
        ({"starting_after": "nope"}, "starting_after"),
        ({"resource_type": "x" * 51}, "resource_type"),
    ],
)
def test_unknown_or_malformed_parameters_are_named(api_client, params, field):
    body = assert_error(api_client.get("/audit_events", params), 422, "validation_failed")
    assert field in body["details"]["fields"]


def test_no_other_accounts_events(api_client, other_client, account):
    campaign = CampaignFactory(account=account)
    api_client.patch(f"/campaigns/{campaign.pk}", {"name": "Mine"}, format="json")
    assert _rows(other_client.get("/audit_events")) == []
    assert _rows(other_client.get("/audit_events", {"resource_id": str(campaign.pk)})) == []
    mine = AuditEvent.objects.get().pk
    assert_error(
        other_client.get("/audit_events", {"starting_after": str(mine)}), 422, "validation_failed"
    )


def test_it_needs_a_key(anon_client):
    assert_error(anon_client.get("/audit_events"), 401, "authentication_required")


def test_a_list_is_a_bounded_number_of_queries(
    api_client, account, auth_queries, django_assert_max_num_queries
):
    campaign = CampaignFactory(account=account)
    for name in ("a", "b", "c", "d"):
        api_client.patch(f"/campaigns/{campaign.pk}", {"name": name}, format="json")
    # The authentication and rate limits, then the page's own: the rows and their count.
    with django_assert_max_num_queries(auth_queries + 2):
        assert len(api_client.get("/audit_events").json()) == 4


def test_retention_deletes_older_rows_in_batches_and_is_safe_twice(settings, account):
    settings.AUDIT_RETENTION_DAYS = 30
    now = timezone.now()
    other = AccountFactory()
    for days, owner in [(31, account), (45, other), (400, account), (29, account), (0, other)]:
        AuditEvent.objects.create(
            account=owner,
            created_at=now - timedelta(days=days),
            actor_type="public",
            action="account.signup",
            resource_type="account",
        )
    assert audit_events_prune(now=now, batch=2) == 3
    assert audit_events_prune(now=now, batch=2) == 0
    assert audit_events_prune_task.apply().get() == 0
    assert AuditEvent.objects.count() == 2
