"""A key's expires_at (refused as a revoked key after it, no longer active) and the last
active admin key rule (docs/accounts.md, "Expiry", "DELETE /api_keys/:id")."""

from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.models import ApiKey
from accounts.services import api_key_create
from tests.accounts.helpers import assert_envelope
from tests.conftest import client_for

pytestmark = pytest.mark.django_db


def _expire(key: ApiKey) -> None:
    ApiKey.objects.filter(pk=key.pk).update(expires_at=timezone.now() - timedelta(seconds=1))


def test_a_key_works_until_it_expires_then_answers_like_a_revoked_one(account, api_key):
    soon = api_key_create(
        account=account, label="soon", expires_at=timezone.now() + timedelta(hours=1)
    )
    revoked = api_key_create(account=account, label="gone")
    ApiKey.objects.filter(pk=revoked.api_key.pk).update(revoked_at=timezone.now())
    client = client_for(soon.plaintext)
    assert client.get("/api_keys").status_code == 200
    _expire(soon.api_key)
    expired_answer = client.get("/api_keys")
    revoked_answer = client_for(revoked.plaintext).get("/api_keys")
    assert_envelope(expired_answer, 401, "invalid_api_key")
    assert expired_answer.content == revoked_answer.content
    listed = {item["label"]: item for item in client_for(api_key.plaintext).get("/api_keys").json()}
    assert listed["soon"]["status"] == "expired"
    assert listed["soon"]["expires_at"] is not None


def test_created_with_a_future_expiry(api_client):
    when = (timezone.now() + timedelta(days=30)).isoformat()
    response = api_client.post("/api_keys", {"label": "month", "expires_at": when}, format="json")
    assert response.status_code == 201
    assert response.json()["status"] == "active"
    assert response.json()["expires_at"] is not None


def test_an_expired_key_does_not_count_as_the_remaining_active_one(api_client, api_key, account):
    spare = api_key_create(account=account, label="spare").api_key
    _expire(spare)
    body = assert_envelope(
        api_client.delete(f"/api_keys/{api_key.api_key.pk}"), 422, "cannot_revoke_last_key"
    )
    assert body["details"] == {"reason": "last_key"}


def test_expired_keys_do_not_count_towards_the_key_limit(api_client, account, settings):
    settings.API_KEYS_MAX = 2
    spare = api_key_create(account=account, label="spare").api_key
    assert_envelope(
        api_client.post("/api_keys", {"label": "third"}, format="json"),
        422,
        "api_key_limit_reached",
    )
    _expire(spare)
    assert api_client.post("/api_keys", {"label": "third"}, format="json").status_code == 201


def test_the_last_active_admin_key_cannot_be_revoked(api_client, api_key, account):
    sender = api_key_create(account=account, label="sender", role="sender").api_key
    body = assert_envelope(
        api_client.delete(f"/api_keys/{api_key.api_key.pk}"), 422, "cannot_revoke_last_key"
    )
    assert body["details"] == {"reason": "last_admin_key"}
    api_key.api_key.refresh_from_db()
    assert api_key.api_key.revoked_at is None
    # Another admin: then it may go, and the sender may be revoked too.
    api_key_create(account=account, label="admin 2")
    assert api_client.delete(f"/api_keys/{sender.pk}").status_code == 204
    assert api_client.delete(f"/api_keys/{api_key.api_key.pk}").status_code == 204


def test_an_expired_admin_does_not_keep_the_rule_satisfied(api_client, api_key, account):
    api_key_create(account=account, label="sender", role="sender")
    _expire(api_key_create(account=account, label="old admin").api_key)
    body = assert_envelope(
        api_client.delete(f"/api_keys/{api_key.api_key.pk}"), 422, "cannot_revoke_last_key"
    )
    assert body["details"]["reason"] == "last_admin_key"
