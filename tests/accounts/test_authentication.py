from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts.models import ApiKey, ApiRequestCount
from accounts.selectors import api_request_counts
from accounts.services import api_key_create, api_key_revoke
from tests.accounts.helpers import assert_envelope
from tests.conftest import client_for

pytestmark = pytest.mark.django_db


def test_no_header_is_authentication_required(anon_client):
    response = anon_client.get("/api_keys")
    assert_envelope(response, 401, "authentication_required")
    assert response["WWW-Authenticate"] == "Bearer"


@pytest.mark.parametrize(
    "header",
    ["Basic dXNlcjpwYXNz", "Token ak_live_x", "Bearer"],
)
def test_other_schemes_or_an_empty_bearer(anon_client, header):
    response = anon_client.get("/api_keys", HTTP_AUTHORIZATION=header)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Bearer"
    assert response.json()["code"] in ("authentication_required", "invalid_api_key")


def _invalid_answers(account) -> dict[str, object]:
    spare = api_key_create(account=account, label="spare")
    revoked = api_key_create(account=account, label="revoked")
    api_key_revoke(api_key=revoked.api_key)
    unknown = "ak_live_" + "A" * 43
    return {
        "unknown": client_for(unknown).get("/api_keys"),
        "malformed": client_for("ak_live_short").get("/api_keys"),
        "wrong prefix": client_for("sk_live_" + "A" * 43).get("/api_keys"),
        "two tokens": client_for(f"{spare.plaintext} extra").get("/api_keys"),
        "non ascii": client_for("ak_live_" + "é" * 43).get("/api_keys"),
        "revoked": client_for(revoked.plaintext).get("/api_keys"),
    }


def test_unknown_malformed_and_revoked_keys_are_identical(account):
    answers = _invalid_answers(account)
    bodies = set()
    for name, response in answers.items():
        assert_envelope(response, 401, "invalid_api_key")
        assert response["WWW-Authenticate"] == "Bearer", name
        bodies.add(response.content)
    assert len(bodies) == 1


def test_a_valid_key_authenticates_as_its_account(api_client, api_key):
    response = api_client.get("/api_keys")
    assert response.status_code == 200
    assert response.json()[0]["id"] == str(api_key.api_key.pk)


def test_last_used_at_is_set_with_one_update_and_no_extra_read(api_client, api_key):
    assert api_key.api_key.last_used_at is None
    before = timezone.now()
    with CaptureQueriesContext(connection) as queries:
        api_client.get("/api_keys")
    api_key.api_key.refresh_from_db()
    assert api_key.api_key.last_used_at >= before
    key_table = ApiKey._meta.db_table
    writes = [q["sql"] for q in queries if "UPDATE" in q["sql"] and key_table in q["sql"]]
    assert len(writes) == 1
    # One lookup by hash: the UPDATE does not re-read the key.
    lookups = [q["sql"] for q in queries if "key_hash" in q["sql"].split("WHERE", 1)[-1]]
    assert len(lookups) == 1


def test_each_authenticated_request_is_counted_by_client_kind(account):
    sdk = api_key_create(account=account, label="sdk", client_kind="sdk")
    mcp = api_key_create(account=account, label="mcp", client_kind="mcp")
    for _ in range(3):
        client_for(sdk.plaintext).get("/api_keys")
    client_for(mcp.plaintext).get("/api_keys")
    client_for("ak_live_" + "A" * 43).get("/api_keys")  # Not authenticated: not counted.
    now = timezone.now()
    counts = api_request_counts(
        account=account, start=now - timedelta(hours=1), end=now + timedelta(hours=1)
    )
    assert counts == {"direct": 0, "mcp": 1, "sdk": 3}
    assert ApiRequestCount.objects.filter(account=account).count() == 2


def test_the_authenticated_account_carries_its_plan(api_client, account):
    # billing reads request.user.plan; it must come with the authentication.
    from rest_framework.test import APIRequestFactory

    from accounts.authentication import ApiKeyAuthentication

    plaintext = api_key_create(account=account, label="x").plaintext
    request = APIRequestFactory().get("/", HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    user, key = ApiKeyAuthentication().authenticate(request)
    with CaptureQueriesContext(connection) as queries:
        assert user.plan.slug == "free"
        assert key.account.email == account.email
        assert key.last_used_at is not None
    assert len(queries) == 0
