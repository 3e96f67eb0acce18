"""The live service for the client tests: the web server (the Procfile's web line) on a free port, on this run's test
database (PostgreSQL: the server processes must share it), with Celery tasks run eagerly
inside the requests (contact imports are processed before their POST answers).

`service_url`, the service with the test settings alone, is one web server per test process
(started by the first test that asks for it): starting one per test was most of these
tests' time. Each test still starts from nothing: the rows its test made are flushed
when it ends (`live_db`), and so are the rate-limit buckets it filled (below).
`service_server(**env)` starts a server of the test's own, for settings of its own.
"""

import uuid

import pytest
import redis
import requests
from outreach_sdk import Client
from outreach_sdk.models import Mailbox

from accounts.services import api_key_create
from tests.accounts.factories import AccountFactory
from tests.accounts.test_rate_limit_server import (
    _server_env,
    _stop,
    _web,
)
from tests.clients.proxy import FaultyProxy
from tests.support.database import live_database_url


@pytest.fixture
def service_server(live_db, settings):
    """Factory: `service_server(**env)` starts the web server and returns its base URL."""
    started = []

    def start(**env) -> str:
        process, url = _web(
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


@pytest.fixture(scope="session")
def _shared_service(django_db_setup):
    """The web server behind `service_url`, and its rate-limit namespace."""
    from django.conf import settings

    prefix = f"rl-test-clients-{uuid.uuid4().hex}"
    process, url = _web(
        _server_env(
            DATABASE_URL=live_database_url(),
            REDIS_URL=settings.REDIS_URL or None,
            RATE_LIMIT_KEY_PREFIX=prefix,
        )
    )
    # Answering once its workers have imported the service: on a busy machine that can
    # outlast the first test's client read timeout.
    requests.get(f"{url}/health", timeout=120)
    yield url, prefix
    _stop(process)


@pytest.fixture
def service_url(live_db, _shared_service, settings):
    url, prefix = _shared_service
    yield url
    # The buckets this test filled, gone as a server of its own would have taken them
    # (without Redis they are rows, which live_db's flush empties).
    if settings.REDIS_URL:
        client = redis.Redis.from_url(settings.REDIS_URL)
        keys = list(client.scan_iter(f"{prefix}:*"))
        if keys:
            client.delete(*keys)
        client.close()


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
