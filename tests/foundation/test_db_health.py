"""The PostgreSQL connection health check (config/db/postgresql): no round trip, and
a connection the server has closed is replaced before a request uses it."""

import time

import psycopg
import pytest
from django.conf import settings
from django.db import close_old_connections, connection

pytestmark = [
    pytest.mark.django_db(transaction=True),  # persistent connections, as in production
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL backend"),
]


def test_the_backend_is_in_use_with_a_bounded_pool():
    database = settings.DATABASES["default"]
    assert database["ENGINE"] == "config.db.postgresql"
    assert database["CONN_MAX_AGE"] == 0  # the pool keeps connections, not the thread
    assert database["OPTIONS"]["pool"]["max_size"] == settings.DB_POOL_MAX_SIZE


def _backend_pid_after_a_request(api_client) -> int:
    assert api_client.get("/api_keys").status_code == 200
    pid = connection.connection.info.backend_pid
    close_old_connections()  # what Django does when a request ends: back to the pool
    assert connection.connection is None
    return pid


def test_a_connection_goes_back_to_the_pool_and_is_reused_without_a_check_query(
    api_client, monkeypatch
):
    from config.db.postgresql import base

    _backend_pid_after_a_request(api_client)
    asked = []
    monkeypatch.setattr(base.DatabaseWrapper, "_answers", lambda conn: asked.append(1) or True)
    assert api_client.get("/api_keys").status_code == 200
    assert asked == []  # an idle, healthy connection from the pool needs no SELECT 1


def test_a_pooled_connection_closed_by_the_server_is_replaced_before_a_request_uses_it(
    api_client,
):
    pid = _backend_pid_after_a_request(api_client)
    params = connection.get_connection_params()
    for key in ("cursor_factory", "context", "pool"):
        params.pop(key, None)
    with psycopg.connect(**params, autocommit=True) as admin:
        # Every connection the pool holds is ended, as a database restart would.
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            " AND backend_type = 'client backend'"
        )
        for _ in range(200):
            if admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone():
                time.sleep(0.01)
            else:
                break
    response = api_client.get("/api_keys")  # would be a 500 on the dead connection
    assert response.status_code == 200, response.content
    assert connection.connection.info.backend_pid != pid


def test_release_gives_the_connection_back_between_queries(account):
    from accounts.models import Account
    from config.db import connection_release

    assert Account.objects.filter(pk=account.pk).exists()
    assert connection.connection is not None
    connection_release()
    assert connection.connection is None
    assert Account.objects.filter(pk=account.pk).exists()  # borrowed again
