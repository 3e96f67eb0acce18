"""The test run's database when DATABASE_URL is unset: an embedded PostgreSQL of its
own (config/embedded_db.py), its data under VAR_DIR/test-postgres, beside `make run`'s
(which a test run must never stop). Started before the first test (the first process of
a run under pytest-xdist starts it; the others find it running) and stopped when the
run that started it ends. pytest-django makes its test databases on it as on any
PostgreSQL server."""

import pytest
from django.db import connection

from config import embedded_db

_started: list[bool] = []


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    from django.conf import settings

    if not settings.EMBEDDED:
        return
    data = settings.EMBEDDED_DATABASE_DIR
    try:
        _started.append(embedded_db.server_start(data))
    except embedded_db.EmbeddedDatabaseError as exc:
        raise pytest.UsageError(f"the test database: {exc}") from None
    embedded_db.settings_refresh(settings.DATABASES["default"], data)


def pytest_unconfigure(config):
    from django.conf import settings

    if any(_started):
        embedded_db.server_stop(settings.EMBEDDED_DATABASE_DIR)


def live_database_url() -> str:
    """DATABASE_URL naming this test process's database (test_<name>), for the servers and
    workers a test starts: over TCP, or over the Unix socket of the embedded server (a
    HOST that is a directory)."""
    params = connection.settings_dict
    user = params.get("USER") or ""
    password = f":{params['PASSWORD']}" if params.get("PASSWORD") else ""
    auth = f"{user}{password}@" if user else ""
    host = params.get("HOST") or "127.0.0.1"
    if host.startswith("/"):
        return f"postgres://{auth}/{params['NAME']}?host={host}"
    port = params.get("PORT") or 5432
    return f"postgres://{auth}{host}:{port}/{params['NAME']}"
