"""Another account's key id is the same 404 as an id that does not exist, on
every accounts endpoint that takes an id, and lists never show it."""

import pytest

from accounts.models import ApiKey
from accounts.services import api_key_create
from tests.accounts.helpers import assert_envelope

pytestmark = pytest.mark.django_db

MISSING = "00000000-0000-0000-0000-000000000000"


@pytest.fixture
def foreign_key(other_account):
    # Two active keys, so revoking one would be allowed if it were ours.
    api_key_create(account=other_account, label="foreign spare")
    return api_key_create(account=other_account, label="foreign").api_key


@pytest.mark.parametrize("method, path", [("delete", "/api_keys/{id}")])
def test_foreign_ids_are_indistinguishable_from_missing_ones(api_client, foreign_key, method, path):
    foreign = getattr(api_client, method)(path.format(id=foreign_key.pk))
    missing = getattr(api_client, method)(path.format(id=MISSING))
    assert_envelope(foreign, 404, "api_key_not_found")
    assert foreign.json() == missing.json()
    foreign_key.refresh_from_db()
    assert foreign_key.revoked_at is None


def test_lists_never_show_another_accounts_keys(api_client, foreign_key):
    ids = {item["id"] for item in api_client.get("/api_keys").json()}
    assert str(foreign_key.pk) not in ids


def test_starting_after_another_accounts_key_is_not_an_anchor(api_client, foreign_key):
    response = api_client.get(f"/api_keys?starting_after={foreign_key.pk}")
    body = assert_envelope(response, 422, "validation_failed")
    assert "starting_after" in body["details"]["fields"]


def test_created_keys_belong_to_the_caller(api_client, account, other_account):
    body = api_client.post("/api_keys", {"label": "mine"}, format="json").json()
    assert ApiKey.objects.get(pk=body["id"]).account_id == account.pk
