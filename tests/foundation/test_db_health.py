"""The PostgreSQL connection health check (config/db/postgresql): no round trip, and
a connection the server has closed is replaced before a request uses it."""

import time

import psycopg
import pytest
from django.conf import settings
from django.db import close_old_connections, connection

pytestmark = [
    pytest.mark.django_db(transaction=True),  # persistent connections, as in production
]


def _terminate_our_backend() -> None:
    """End this process's server session from another connection, as a database
    restart or an administrator would, and wait until it is gone."""
    pid = connection.connection.info.backend_pid
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    with psycopg.connect(**params, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])
        for _ in range(200):
            if admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone():
                time.sleep(0.01)
            else:
                break


def test_the_backend_is_in_use():
    assert settings.DATABASES["default"]["ENGINE"] == "config.db.postgresql"
    assert settings.DATABASES["default"]["CONN_HEALTH_CHECKS"] is True


def _count_statements(monkeypatch) -> list:
    """Statements run by the health check itself (Django's runs `SELECT 1` through a
    cursor of the psycopg connection)."""
    made = []
    psycopg_connection = connection.connection
    original = psycopg_connection.cursor
    monkeypatch.setattr(
        psycopg_connection, "cursor", lambda *a, **k: made.append(1) or original(*a, **k)
    )
    return made


def test_the_check_of_an_idle_connection_sends_nothing(api_client, monkeypatch):
    assert api_client.get("/api_keys").status_code == 200
    made = _count_statements(monkeypatch)
    assert connection.is_usable()
    assert made == []


def test_a_connection_closed_by_the_server_is_replaced_before_the_next_request(
    api_client, monkeypatch
):
    assert api_client.get("/api_keys").status_code == 200
    first_pid = connection.connection.info.backend_pid
    _terminate_our_backend()
    made = _count_statements(monkeypatch)
    assert not connection.is_usable()
    assert made == [1]  # the server spoke first: only then is it asked
    monkeypatch.undo()

    # What Django does when a request starts (the test client leaves it out so a test's
    # transaction survives): check and, if need be, replace the connection.
    close_old_connections()
    response = api_client.get("/api_keys")  # would be a 500 on the dead connection
    assert response.status_code == 200, response.content
    assert connection.connection.info.backend_pid != first_pid


def test_an_open_idle_connection_is_usable(api_client):
    assert api_client.get("/api_keys").status_code == 200
    assert connection.is_usable()
    pid = connection.connection.info.backend_pid
    close_old_connections()
    assert api_client.get("/api_keys").status_code == 200
    assert connection.connection.info.backend_pid == pid  # kept, not reconnected


# --- a worker's pool (config.worker.database_pool_enable) -----------------------------


@pytest.fixture
def pooled(settings):
    """This process's connections in the pool, as a Celery worker has them."""
    from config.worker import database_pool_enable

    database = settings.DATABASES["default"]
    saved = {key: database.get(key) for key in ("CONN_MAX_AGE", "CONN_HEALTH_CHECKS")}
    saved_options = dict(database.get("OPTIONS", {}))
    assert database_pool_enable()
    yield
    connection.close()
    connection.close_pool()
    database.update(saved)
    database["OPTIONS"] = saved_options


def test_the_pool_is_bounded_and_keeps_no_connection_per_thread(pooled):
    database = settings.DATABASES["default"]
    assert database["CONN_MAX_AGE"] == 0
    assert database["OPTIONS"]["pool"]["max_size"] == settings.DB_POOL_MAX_SIZE


def _backend_pid_after_a_request(api_client) -> int:
    assert api_client.get("/api_keys").status_code == 200
    pid = connection.connection.info.backend_pid
    close_old_connections()  # what Django does when a request ends: back to the pool
    assert connection.connection is None
    return pid


def test_a_connection_goes_back_to_the_pool_and_is_reused_without_a_check_query(
    pooled, api_client, monkeypatch
):
    from config.db.postgresql import base

    _backend_pid_after_a_request(api_client)
    asked = []
    monkeypatch.setattr(base.DatabaseWrapper, "_answers", lambda conn: asked.append(1) or True)
    assert api_client.get("/api_keys").status_code == 200
    assert asked == []  # an idle, healthy connection from the pool needs no SELECT 1


def test_a_pooled_connection_closed_by_the_server_is_replaced_before_a_request_uses_it(
    pooled, api_client
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


def test_release_gives_the_connection_back_between_queries(pooled, account):
    from accounts.models import Account
    from config.db import connection_release

    assert Account.objects.filter(pk=account.pk).exists()
    assert connection.connection is not None
    connection_release()
    assert connection.connection is None
    assert Account.objects.filter(pk=account.pk).exists()  # borrowed again
