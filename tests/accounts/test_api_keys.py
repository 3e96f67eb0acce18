from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.models import ApiKey
from accounts.services import api_key_create
from accounts.tokens import token_hash
from tests.accounts.helpers import assert_envelope
from tests.conftest import client_for

pytestmark = pytest.mark.django_db

ITEM_FIELDS = {
    "id",
    "prefix",
    "label",
    "client_kind",
    "role",
    "daily_send_limit",
    "expires_at",
    "status",
    "created_at",
    "last_used_at",
    "revoked_at",
}


def test_list_is_newest_first_without_secrets(api_client, api_key, account):
    older = api_key_create(account=account, label="older").api_key
    ApiKey.objects.filter(pk=older.pk).update(created_at=timezone.now() - timedelta(days=1))
    newer = api_key_create(account=account, label="newer", client_kind="mcp").api_key
    response = api_client.get("/api_keys")
    assert response.status_code == 200
    items = response.json()
    assert [i["id"] for i in items] == [str(newer.pk), str(api_key.api_key.pk), str(older.pk)]
    for item in items:
        assert set(item) == ITEM_FIELDS
    assert items[0]["client_kind"] == "mcp"
    assert items[0]["status"] == "active" and items[0]["revoked_at"] is None
    assert items[0]["created_at"].endswith("Z")
    text = response.content.decode()
    assert api_key.plaintext not in text
    assert api_key.api_key.key_hash not in text


def test_list_shows_revoked_keys_and_last_use(api_client, api_key, account):
    spare = api_key_create(account=account, label="spare").api_key
    assert api_client.delete(f"/api_keys/{spare.pk}").status_code == 204
    items = {i["id"]: i for i in api_client.get("/api_keys").json()}
    assert items[str(spare.pk)]["status"] == "revoked"
    assert items[str(spare.pk)]["revoked_at"].endswith("Z")
    # The key making the request was used by it.
    assert items[str(api_key.api_key.pk)]["last_used_at"].endswith("Z")


def test_list_only_shows_the_callers_keys(api_client, other_client):
    other_client.get("/api_keys")
    labels = [i["label"] for i in api_client.get("/api_keys").json()]
    assert labels == ["test"]


def test_list_is_paginated(api_client, account):
    for n in range(3):
        api_key_create(account=account, label=f"k{n}")
    first = api_client.get("/api_keys?limit=2")
    assert len(first.json()) == 2
    assert 'rel="next"' in first["Link"]
    assert_envelope(api_client.get("/api_keys?limit=0"), 422, "validation_failed")


def test_list_query_count_does_not_grow_with_keys(
    api_client, account, django_assert_num_queries, auth_queries, settings
):
    settings.API_KEYS_MAX = 40
    expected = auth_queries + 1  # the list: one SELECT
    with django_assert_num_queries(expected):
        assert api_client.get("/api_keys").status_code == 200
    for n in range(30):
        api_key_create(account=account, label=f"k{n}")
    with django_assert_num_queries(expected):
        assert len(api_client.get("/api_keys").json()) == 31


def test_create_returns_the_plaintext_once(api_client, account):
    response = api_client.post("/api_keys", {"label": "CI", "client_kind": "sdk"}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert set(body) == ITEM_FIELDS | {"plaintext"}
    key = ApiKey.objects.get(pk=body["id"])
    assert (key.account_id, key.label, key.client_kind) == (account.pk, "CI", "sdk")
    assert body["status"] == "active" and body["last_used_at"] is None
    assert body["prefix"] == body["plaintext"][:12] == key.prefix
    assert key.key_hash == token_hash(body["plaintext"])
    assert client_for(body["plaintext"]).get("/api_keys").status_code == 200
    assert "plaintext" not in api_client.get("/api_keys").json()[0]


def test_an_account_holds_at_most_api_keys_max_active_keys(api_client, account, settings):
    settings.API_KEYS_MAX = 3
    made = [api_client.post("/api_keys", {"label": f"k{n}"}, format="json") for n in range(2)]
    assert [r.status_code for r in made] == [201, 201]

    body = assert_envelope(
        api_client.post("/api_keys", {"label": "one too many"}, format="json"),
        422,
        "api_key_limit_reached",
    )
    assert body["details"] == {"limit": 3}
    assert ApiKey.objects.filter(account=account).count() == 3
    # A revoked key does not count: revoking one makes room for the next.
    assert api_client.delete(f"/api_keys/{made[0].json()['id']}").status_code == 204
    assert api_client.post("/api_keys", {"label": "k2"}, format="json").status_code == 201


def test_create_defaults_to_direct(api_client):
    response = api_client.post("/api_keys", {"label": "x"}, format="json")
    assert response.json()["client_kind"] == "direct"


@pytest.mark.parametrize(
    "payload, field",
    [
        ({}, "label"),
        ({"label": ""}, "label"),
        ({"label": "x" * 201}, "label"),
        ({"label": "x", "client_kind": "browser"}, "client_kind"),
    ],
)
def test_create_validation(api_client, payload, field):
    body = assert_envelope(
        api_client.post("/api_keys", payload, format="json"), 422, "validation_failed"
    )
    assert field in body["details"]["fields"]
    assert ApiKey.objects.count() == 1


def test_revoke_is_204_and_the_key_stops_working(api_client, account):
    spare = api_key_create(account=account, label="spare")
    response = api_client.delete(f"/api_keys/{spare.api_key.pk}")
    assert response.status_code == 204
    assert response.content == b""
    spare.api_key.refresh_from_db()
    assert spare.api_key.revoked_at is not None
    assert_envelope(client_for(spare.plaintext).get("/api_keys"), 401, "invalid_api_key")


def test_a_key_can_revoke_itself_when_another_remains(api_client, api_key, account):
    api_key_create(account=account, label="spare")
    assert api_client.delete(f"/api_keys/{api_key.api_key.pk}").status_code == 204
    assert_envelope(api_client.get("/api_keys"), 401, "invalid_api_key")


def test_revoking_the_last_active_key_is_refused(api_client, api_key):
    response = api_client.delete(f"/api_keys/{api_key.api_key.pk}")
    assert_envelope(response, 422, "cannot_revoke_last_key")
    api_key.api_key.refresh_from_db()
    assert api_key.api_key.revoked_at is None


def test_revoked_keys_do_not_count_as_remaining(api_client, api_key, account):
    spare = api_key_create(account=account, label="spare").api_key
    assert api_client.delete(f"/api_keys/{spare.pk}").status_code == 204
    assert_envelope(
        api_client.delete(f"/api_keys/{api_key.api_key.pk}"), 422, "cannot_revoke_last_key"
    )


def test_revoking_a_revoked_key_is_a_no_op(api_client, account):
    spare = api_key_create(account=account, label="spare").api_key
    assert api_client.delete(f"/api_keys/{spare.pk}").status_code == 204
    spare.refresh_from_db()
    revoked_at = spare.revoked_at
    assert api_client.delete(f"/api_keys/{spare.pk}").status_code == 204
    spare.refresh_from_db()
    assert spare.revoked_at == revoked_at


@pytest.mark.parametrize("key_id", ["00000000-0000-0000-0000-000000000000", "not-a-uuid"])
def test_revoke_unknown_key_is_404(api_client, key_id):
    assert_envelope(api_client.delete(f"/api_keys/{key_id}"), 404, "api_key_not_found")


def test_unauthenticated_calls_are_401(anon_client, api_key):
    for response in (
        anon_client.get("/api_keys"),
        anon_client.post("/api_keys", {"label": "x"}, format="json"),
        anon_client.delete(f"/api_keys/{api_key.api_key.pk}"),
    ):
        assert_envelope(response, 401, "authentication_required")


def test_the_schema_describes_the_accounts_endpoints(anon_client):
    schema = anon_client.get("/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    create = schema["paths"]["/api_keys"]["post"]
    assert "Idempotency-Key" in [p["name"] for p in create["parameters"]]
    assert create["security"] == [{"bearer": []}]
    assert "Idempotency-Key" not in str(schema["paths"]["/signup"]["post"].get("parameters", []))
    assert schema["paths"]["/signup"]["post"].get("security", [{}]) in ([], [{}])
    assert "delete" in schema["paths"]["/api_keys/{id}"]
