"""Key roles (docs/accounts.md, "Roles"): every operation of the OpenAPI schema, with a
key of each role, answers what the roles table says; the role is checked before the id;
keys made without a role are admins."""

import uuid

import pytest
from drf_spectacular.generators import SchemaGenerator

from accounts import throttling
from accounts.models import ApiKey
from accounts.services import api_key_create
from config.api.roles import PUBLIC, ROLES, RULES, operation_of, role_allows
from tests.accounts.helpers import assert_envelope
from tests.conftest import client_for
from tests.outreach.factories import CampaignFactory

pytestmark = pytest.mark.django_db

# Operations of the table that other parts of the service serve (not in this schema yet).
SERVED_ELSEWHERE = {"GET /audit_events"}


def _schema_operations() -> list[str]:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    return [
        f"{method.upper()} {path}"
        for path, operations in schema["paths"].items()
        for method in operations
        if method in {"get", "post", "put", "patch", "delete"}
    ]


OPERATIONS = _schema_operations()


def test_every_operation_of_the_schema_has_its_rule():
    missing = [operation for operation in OPERATIONS if operation not in RULES]
    assert missing == []
    assert set(RULES) - set(OPERATIONS) <= SERVED_ELSEWHERE


@pytest.fixture
def role_clients(account, monkeypatch):
    monkeypatch.setattr(throttling, "API_KEY_LIMIT", 10**9)
    return {
        role: client_for(api_key_create(account=account, label=role, role=role).plaintext)
        for role in ROLES
    }


def _call(client, operation: str):
    method, path = operation.split(" ", 1)
    url = path.replace("{id}", str(uuid.uuid4()))
    for name in ("enrollment_id", "delivery_id", "reply_id", "credential_id"):
        url = url.replace("{" + name + "}", str(uuid.uuid4()))
    call = getattr(client, method.lower())
    if method in {"GET", "DELETE"}:
        return call(url)
    return call(url, {}, format="json")


def _refused(response) -> bool:
    return response.status_code == 403 and response.json().get("code") == "insufficient_role"


@pytest.mark.parametrize("operation", OPERATIONS)
def test_each_role_gets_the_documented_answer(role_clients, anon_client, operation):
    required = RULES[operation]
    if required == PUBLIC:  # no API key (some have a credential of their own)
        response = _call(anon_client, operation)
        assert b"authentication_required" not in response.content
        return
    assert _call(anon_client, operation).status_code == 401
    for role, client in role_clients.items():
        response = _call(client, operation)
        if role_allows(role, required):
            assert not _refused(response), (role, response.content)
        else:
            body = assert_envelope(response, 403, "insufficient_role")
            assert body["details"] == {"role": role, "required": required}


def test_the_role_is_checked_before_the_id(account, other_account, monkeypatch):
    reader = client_for(api_key_create(account=account, label="r", role="reader").plaintext)
    mine = CampaignFactory(account=account)
    foreign = CampaignFactory(account=other_account)
    answers = [
        reader.post(f"/campaigns/{campaign_id}/dispatch", {}, format="json").json()
        for campaign_id in (mine.pk, foreign.pk, uuid.uuid4(), "not-an-id")
    ]
    assert all(answer == answers[0] for answer in answers)
    assert answers[0]["code"] == "insufficient_role"
    assert answers[0]["details"] == {"role": "reader", "required": "drafter"}


def test_a_malformed_webhook_id_is_still_the_roles(account):
    sender = client_for(api_key_create(account=account, label="s", role="sender").plaintext)
    body = assert_envelope(
        sender.post("/webhooks/not-a-uuid/rotate_secret"), 403, "insufficient_role"
    )
    assert body["details"] == {"role": "sender", "required": "admin"}


def test_the_most_literal_template_wins():
    assert operation_of("POST", "/webhooks/psp") == "POST /webhooks/psp"
    assert operation_of("POST", "/webhooks/x/test") == "POST /webhooks/{id}/test"
    assert operation_of("POST", "/smtp_credentials/oauth") == "POST /smtp_credentials/oauth"
    assert operation_of("HEAD", "/campaigns") == "GET /campaigns"
    assert operation_of("GET", "/nowhere/at/all") is None


def test_keys_made_without_a_role_are_admins(api_client, api_key):
    assert api_key.api_key.role == ApiKey.Role.ADMIN
    response = api_client.post("/api_keys", {"label": "made by the default"}, format="json")
    assert response.status_code == 201
    assert response.json()["role"] == "admin"


def test_a_key_is_created_with_its_role_and_listed_with_it(api_client):
    response = api_client.post(
        "/api_keys", {"label": "agent", "role": "drafter", "daily_send_limit": 50}, format="json"
    )
    assert response.status_code == 201
    listed = {item["label"]: item for item in api_client.get("/api_keys").json()}
    assert listed["agent"]["role"] == "drafter"
    assert listed["agent"]["daily_send_limit"] == 50
    assert listed["agent"]["expires_at"] is None
    assert "plaintext" not in listed["agent"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"label": "x", "role": "owner"}, "role"),
        ({"label": "x", "daily_send_limit": -1}, "daily_send_limit"),
        ({"label": "x", "daily_send_limit": "many"}, "daily_send_limit"),
        ({"label": "x", "expires_at": "2001-01-01T00:00:00Z"}, "expires_at"),
        ({"label": "x", "expires_at": "soon"}, "expires_at"),
    ],
)
def test_bad_key_fields_are_named(api_client, body, field):
    response = api_client.post("/api_keys", body, format="json")
    envelope = assert_envelope(response, 422, "validation_failed")
    assert field in envelope["details"]["fields"]
    assert ApiKey.objects.filter(label="x").count() == 0


@pytest.mark.parametrize("role", ["sender", "drafter", "reader"])
def test_only_an_admin_creates_or_revokes_keys(account, api_key, role):
    client = client_for(api_key_create(account=account, label=role, role=role).plaintext)
    assert_envelope(
        client.post("/api_keys", {"label": "x"}, format="json"), 403, "insufficient_role"
    )
    assert_envelope(client.delete(f"/api_keys/{api_key.api_key.pk}"), 403, "insufficient_role")
    assert client.get("/api_keys").status_code == 200
    assert client.get("/billing/usage").status_code == 200
    api_key.api_key.refresh_from_db()
    assert api_key.api_key.revoked_at is None
