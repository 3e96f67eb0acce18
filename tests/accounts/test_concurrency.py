"""Races on PostgreSQL, with real threads (each with its own connection)."""

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection, connections

from accounts.models import Account, ApiKey
from accounts.services import api_key_create
from tests.accounts.factories import AccountFactory
from tests.conftest import client_for

pytestmark = [
    pytest.mark.usefixtures("live_db"),
]


def run_together(*calls):
    """Start the calls at the same moment in threads; return their results."""
    barrier = threading.Barrier(len(calls))

    def run(call):
        try:
            barrier.wait(timeout=10)
            return call()
        finally:
            connections.close_all()

    with ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(run, calls))


@pytest.mark.parametrize("round_", range(5))
def test_revoking_the_last_two_keys_at_once_leaves_one_active(round_):
    account = AccountFactory()
    first = api_key_create(account=account, label="first")
    second = api_key_create(account=account, label="second")
    responses = run_together(
        lambda: client_for(first.plaintext).delete(f"/api_keys/{second.api_key.pk}"),
        lambda: client_for(second.plaintext).delete(f"/api_keys/{first.api_key.pk}"),
    )
    statuses = sorted(r.status_code for r in responses)
    assert ApiKey.objects.filter(account=account, revoked_at__isnull=True).count() == 1
    # The loser either saw the last key (422) or had its own key revoked first (401).
    assert statuses in ([204, 401], [204, 422]), [r.content for r in responses]


@pytest.mark.parametrize("round_", range(5))
def test_revoking_two_keys_with_one_caller_key_leaves_one_active(round_):
    account = AccountFactory()
    caller = api_key_create(account=account, label="caller")
    other = api_key_create(account=account, label="other")
    client = client_for(caller.plaintext)
    responses = run_together(
        lambda: client_for(caller.plaintext).delete(f"/api_keys/{caller.api_key.pk}"),
        lambda: client.delete(f"/api_keys/{other.api_key.pk}"),
    )
    assert ApiKey.objects.filter(account=account, revoked_at__isnull=True).count() == 1
    assert sorted(r.status_code for r in responses) in ([204, 401], [204, 422])


@pytest.mark.parametrize("round_", range(5))
def test_concurrent_identical_idempotent_requests_create_one_key(round_):
    account = AccountFactory()
    plaintext = api_key_create(account=account, label="caller").plaintext

    def create():
        return client_for(plaintext).post(
            "/api_keys", {"label": "once"}, format="json", HTTP_IDEMPOTENCY_KEY="race"
        )

    responses = run_together(create, create, create)
    assert ApiKey.objects.filter(account=account, label="once").count() == 1
    created = [r for r in responses if r.status_code == 201]
    assert created, [r.content for r in responses]
    assert len({r.content for r in created}) == 1  # Replays carry the same key.
    for response in responses:
        if response.status_code != 201:
            assert response.status_code == 409
            assert response.json()["code"] == "idempotency_in_progress"


def test_concurrent_signups_with_one_email_make_one_account():
    def signup(n):
        return lambda: client_for(None).post(
            "/signup",
            {"email": "Race@Example.com" if n % 2 else "race@example.com"},
            format="json",
            REMOTE_ADDR=f"203.0.113.{n}",
        )

    responses = run_together(*(signup(n) for n in range(4)))
    assert sorted(r.status_code for r in responses) == [201, 422, 422, 422]
    assert Account.objects.filter(email__iexact="race@example.com").count() == 1


def test_the_authentication_statement_leaves_the_session_durable():
    """The authentication statement commits with full durability, like every write."""
    account = AccountFactory()
    plaintext = api_key_create(account=account, label="durable").plaintext
    assert client_for(plaintext).get("/api_keys").status_code == 200
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        assert cursor.fetchone()[0] == "on"
