"""The live service for the client tests: gunicorn on a free port, on this run's test
database (PostgreSQL: the server processes must share it), with Celery tasks run eagerly
inside the requests (contact imports are processed before their POST answers)."""

import pytest
from outreach_sdk import Client
from outreach_sdk.models import Mailbox

from accounts.services import api_key_create
from tests.accounts.factories import AccountFactory
from tests.accounts.test_rate_limit_server import (
    _gunicorn,
    _server_env,
    _stop,
)
from tests.clients.proxy import FaultyProxy
from tests.support.database import live_database_url


@pytest.fixture
def service_server(live_db, settings):
    """Factory: `service_server(**env)` starts gunicorn and returns its base URL."""
    started = []

    def start(**env) -> str:
        process, url = _gunicorn(
            _server_env(
                DATABASE_URL=live_database_url(),
                REDIS_URL=settings.REDIS_URL or None,
                RATE_LIMIT_KEY_PREFIX=settings.RATE_LIMIT_KEY_PREFIX,
                **env,
            )
        )
        started.append(process)
        return url

    yield start
    for process in started:
        _stop(process)


@pytest.fixture
def service_url(service_server) -> str:
    return service_server()


@pytest.fixture
def proxy(service_url):
    server = FaultyProxy(service_url).start()
    yield server
    server.stop()


@pytest.fixture
def sdk_account(live_db):
    return AccountFactory()


@pytest.fixture
def sdk_key(sdk_account) -> str:
    return api_key_create(account=sdk_account, label="sdk", client_kind="sdk").plaintext


def mailbox_create(client: Client, sink) -> Mailbox:
    """A password mailbox on an SMTP sink (tests/support/smtp.py), made through the SDK."""
    return client.mailboxes.create(
        from_email="ada@example.com",
        smtp_host=sink.host,
        smtp_port=sink.port,
        smtp_security="none",
        smtp_username="ada",
        smtp_password="secret",
    )
