"""The /webhooks management endpoints."""

import uuid

import pytest
from django.utils import timezone

from tests.support.stored import stored_value
from tests.webhooks.factories import WebhookDeliveryFactory, WebhookFactory
from webhooks.events import event_emit
from webhooks.models import DeliveryJob, Webhook, WebhookDelivery

# Made-up event payloads, emitted to exercise the outbox (tests/support/event_schemas.py).
pytestmark = [pytest.mark.django_db, pytest.mark.synthetic_events]

URL = "http://127.0.0.1:9/hook"  # private networks are allowed in the test settings
WEBHOOK_FIELDS = {"id", "url", "event_filters", "disabled_at", "consecutive_failures", "created_at"}


def assert_error(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content
    body = response.json()
    assert body["code"] == code
    assert body["type"] == f"http://testserver/docs/errors/{code}"
    assert body["message"]
    return body


def create(client, **webhook):
    return client.post("/webhooks", {"webhook": {"url": URL, **webhook}}, format="json")


def test_it_creates_a_webhook_and_shows_the_secret_once(api_client, account):
    response = create(api_client, event_filters=["enrollment.sent", "campaign.paused"])

    assert response.status_code == 201
    body = response.json()
    assert set(body) == WEBHOOK_FIELDS | {"secret"}
    assert body["url"] == URL
    assert body["event_filters"] == ["enrollment.sent", "campaign.paused"]
    assert body["disabled_at"] is None
    assert body["consecutive_failures"] == 0
    assert body["created_at"].endswith("Z")
    assert body["secret"].startswith("whsec_") and len(body["secret"]) > 40
    webhook = Webhook.objects.get(pk=body["id"])
    assert webhook.account == account
    assert webhook.secret == body["secret"]
    assert body["secret"] not in stored_value(webhook, "secret")  # stored encrypted

    listed = api_client.get("/webhooks").json()
    assert [w["id"] for w in listed] == [body["id"]]
    assert set(listed[0]) == WEBHOOK_FIELDS  # no secret
    assert set(api_client.get(f"/webhooks/{body['id']}").json()) == WEBHOOK_FIELDS


def test_event_filters_default_to_everything(api_client):
    assert create(api_client).json()["event_filters"] == ["*"]


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"webhook": {}}, "webhook.url"),
        ({}, "webhook"),
        ({"webhook": {"url": "ftp://example.com/x"}}, "webhook.url"),
        ({"webhook": {"url": "not a url"}}, "webhook.url"),
        ({"webhook": {"url": "https:///nohost"}}, "webhook.url"),
        ({"webhook": {"url": "http://example.com:99999/"}}, "webhook.url"),
        ({"webhook": {"url": "https://" + "a" * 2050 + ".com"}}, "webhook.url"),
        ({"webhook": {"url": "http://no-such-host.invalid/"}}, "webhook.url"),
        ({"webhook": {"url": URL, "event_filters": []}}, "webhook.event_filters"),
        ({"webhook": {"url": URL, "event_filters": "*"}}, "webhook.event_filters"),
        (
            {"webhook": {"url": URL, "event_filters": ["enrollment.exploded"]}},
            "webhook.event_filters",
        ),
        (
            {"webhook": {"url": URL, "event_filters": ["*", "enrollment.sent"]}},
            "webhook.event_filters",
        ),
        (
            {"webhook": {"url": URL, "event_filters": ["enrollment.sent", "enrollment.sent"]}},
            "webhook.event_filters",
        ),
    ],
)
def test_it_refuses_invalid_webhooks(api_client, payload, field):
    body = assert_error(
        api_client.post("/webhooks", payload, format="json"), 422, "validation_failed"
    )
    assert field in body["details"]["fields"]
    assert not Webhook.objects.exists()


def test_it_caps_webhooks_per_account(api_client, account, monkeypatch):
    monkeypatch.setattr("webhooks.services.MAX_WEBHOOKS_PER_ACCOUNT", 2)
    WebhookFactory.create_batch(2, account=account)
    body = assert_error(create(api_client), 422, "validation_failed")
    assert "webhook" in body["details"]["fields"]


def test_list_is_scoped_newest_first_in_bounded_queries(
    api_client, account, other_account, django_assert_max_num_queries, auth_queries
):
    first = WebhookFactory(account=account)
    second = WebhookFactory(account=account)
    WebhookFactory(account=other_account)
    WebhookFactory.create_batch(5, account=account)
    with django_assert_max_num_queries(auth_queries + 1):
        body = api_client.get("/webhooks").json()
    ids = [w["id"] for w in body]
    assert len(ids) == 7
    assert ids.index(str(second.id)) < ids.index(str(first.id))


def test_patch_updates_url_and_filters_and_keeps_the_secret(api_client, account):
    webhook = WebhookFactory(account=account)
    secret = webhook.secret
    response = api_client.patch(
        f"/webhooks/{webhook.id}",
        {"webhook": {"url": "http://127.0.0.1:8/new", "event_filters": ["enrollment.opened"]}},
        format="json",
    )
    assert response.status_code == 200
    assert response.json()["url"] == "http://127.0.0.1:8/new"
    assert response.json()["event_filters"] == ["enrollment.opened"]
    assert "secret" not in response.json()
    webhook.refresh_from_db()
    assert webhook.secret == secret


def test_patch_validates_like_create(api_client, account):
    webhook = WebhookFactory(account=account)
    body = assert_error(
        api_client.patch(
            f"/webhooks/{webhook.id}", {"webhook": {"event_filters": ["nope"]}}, format="json"
        ),
        422,
        "validation_failed",
    )
    assert "webhook.event_filters" in body["details"]["fields"]
    assert_error(
        api_client.patch(
            f"/webhooks/{webhook.id}", {"webhook": {"disabled_at": "yesterday"}}, format="json"
        ),
        422,
        "validation_failed",
    )


def test_patch_disabled_at_null_re_enables_and_a_timestamp_disables(api_client, account):
    webhook = WebhookFactory(account=account, disabled_at=timezone.now(), consecutive_failures=5)
    response = api_client.patch(
        f"/webhooks/{webhook.id}", {"webhook": {"disabled_at": None}}, format="json"
    )
    assert response.status_code == 200
    assert response.json()["disabled_at"] is None
    assert response.json()["consecutive_failures"] == 0

    before = timezone.now()
    response = api_client.patch(
        f"/webhooks/{webhook.id}",
        {"webhook": {"disabled_at": "2000-01-01T00:00:00Z"}},
        format="json",
    )
    webhook.refresh_from_db()
    assert webhook.disabled_at >= before  # the server's time, not the one sent
    assert response.json()["disabled_at"] is not None


def test_rotate_secret_returns_a_new_secret(api_client, account):
    webhook = WebhookFactory(account=account)
    old = webhook.secret
    response = api_client.post(f"/webhooks/{webhook.id}/rotate_secret")
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"id", "secret"}
    assert body["id"] == str(webhook.id)
    assert body["secret"].startswith("whsec_") and body["secret"] != old
    webhook.refresh_from_db()
    assert webhook.secret == body["secret"]


def test_delete_removes_the_webhook_its_jobs_and_deliveries(api_client, account):
    webhook = WebhookFactory(account=account)
    WebhookDeliveryFactory.create_batch(3, webhook=webhook)
    event_emit(account=account, event_type="enrollment.sent", data={})
    assert DeliveryJob.objects.filter(webhook=webhook).exists()

    response = api_client.delete(f"/webhooks/{webhook.id}")

    assert response.status_code == 204
    assert response.content == b""
    assert not Webhook.objects.exists()
    assert not WebhookDelivery.objects.exists()
    assert not DeliveryJob.objects.exists()
    assert_error(api_client.get(f"/webhooks/{webhook.id}"), 404, "webhook_not_found")


def test_deliveries_newest_first_with_a_limit(
    api_client, account, django_assert_max_num_queries, auth_queries
):
    webhook = WebhookFactory(account=account)
    rows = [WebhookDeliveryFactory(webhook=webhook, attempt=n) for n in range(1, 6)]
    WebhookDeliveryFactory()  # another webhook's

    with django_assert_max_num_queries(auth_queries + 2):
        body = api_client.get(f"/webhooks/{webhook.id}/deliveries").json()
    assert [d["id"] for d in body] == [str(r.id) for r in reversed(rows)]
    assert set(body[0]) == {
        "id",
        "event_type",
        "attempt",
        "state",
        "status_code",
        "error",
        "delivered_at",
        "created_at",
        "duration_ms",
        "test",
        "event_id",
    }
    limited = api_client.get(f"/webhooks/{webhook.id}/deliveries?limit=2").json()
    assert [d["id"] for d in limited] == [str(rows[4].id), str(rows[3].id)]


@pytest.mark.parametrize("limit", ["0", "1001", "ten"])
def test_deliveries_limit_is_validated(api_client, account, limit):
    webhook = WebhookFactory(account=account)
    body = assert_error(
        api_client.get(f"/webhooks/{webhook.id}/deliveries?limit={limit}"), 422, "validation_failed"
    )
    assert "limit" in body["details"]["fields"]


def test_deliveries_limit_allows_1000(api_client, account):
    webhook = WebhookFactory(account=account)
    assert api_client.get(f"/webhooks/{webhook.id}/deliveries?limit=1000").status_code == 200


@pytest.mark.parametrize(
    ("method", "suffix"),
    [
        ("get", ""),
        ("patch", ""),
        ("delete", ""),
        ("post", "/rotate_secret"),
        ("get", "/deliveries"),
    ],
)
def test_another_accounts_webhook_is_not_found(api_client, other_account, method, suffix):
    webhook = WebhookFactory(account=other_account)
    secret = webhook.secret
    for path in (
        f"/webhooks/{webhook.id}{suffix}",
        f"/webhooks/{uuid.uuid4()}{suffix}",
        f"/webhooks/nope{suffix}",
    ):
        response = getattr(api_client, method)(
            path, {"webhook": {"disabled_at": None}}, format="json"
        )
        assert_error(response, 404, "webhook_not_found")
    webhook.refresh_from_db()
    assert webhook.secret == secret


def test_endpoints_need_a_key(anon_client, account):
    webhook = WebhookFactory(account=account)
    assert_error(anon_client.get("/webhooks"), 401, "authentication_required")
    assert_error(
        anon_client.get(f"/webhooks/{webhook.id}/deliveries"), 401, "authentication_required"
    )
    assert_error(anon_client.post("/webhooks/nope/rotate_secret"), 401, "authentication_required")


def test_psp_path_is_not_taken(api_client):
    # /webhooks/psp belongs to the billing app; this app never answers it.
    from django.urls import Resolver404, resolve

    try:
        match = resolve("/webhooks/psp")
    except Resolver404:
        return
    assert not match.func.__module__.startswith("webhooks.")


def test_put_is_not_allowed(api_client, account):
    webhook = WebhookFactory(account=account)
    assert_error(
        api_client.put(f"/webhooks/{webhook.id}", {}, format="json"), 405, "method_not_allowed"
    )
