"""Shared fixtures: an account with a key, and API clients for it, for another
account, and for nobody."""

import uuid

import pytest
from pytest_django.fixtures import _get_databases_for_setup
from rest_framework.test import APIClient

from accounts.services import api_key_create
from plans.catalog import catalog_ensure
from plans.models import Plan
from tests.accounts.factories import AccountFactory


def client_for(plaintext: str | None) -> APIClient:
    client = APIClient()
    if plaintext:
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    return client


@pytest.fixture
def account(db):
    return AccountFactory()


@pytest.fixture
def api_key(account):
    """The account's key as issued: `.api_key` (the row) and `.plaintext`."""
    return api_key_create(account=account, label="test")


@pytest.fixture
def api_client(api_key) -> APIClient:
    return client_for(api_key.plaintext)


@pytest.fixture
def other_account(db):
    return AccountFactory()


@pytest.fixture
def other_client(other_account) -> APIClient:
    return client_for(api_key_create(account=other_account, label="other").plaintext)


@pytest.fixture
def anon_client() -> APIClient:
    return APIClient()


def plan_catalog_ensure() -> None:
    """Create missing catalog plans. The flush that ends a transactional test
    empties every table; plans' post_migrate hook puts the catalog back then, and
    this covers a database kept (--reuse-db) from a run that stopped mid-way."""
    catalog_ensure(Plan)


@pytest.fixture(scope="session", autouse=True)
def _plan_catalog(request, django_db_setup, django_db_blocker):
    # pytest-django sets up no test database when no collected test uses one (its own
    # rule, hence its private helper): there is no catalog to ensure then.
    if "default" not in _get_databases_for_setup(request.session.items)[0]:
        return
    # A kept (--reuse-db) database may have been flushed by a transactional test.
    with django_db_blocker.unblock():
        plan_catalog_ensure()


# accounts: every test gets its own rate-limit namespace, so buckets left in Redis
# by earlier tests (signups from 127.0.0.1) never count against it.
@pytest.fixture(autouse=True)
def _rate_limit_namespace(settings):
    settings.RATE_LIMIT_KEY_PREFIX = f"rl-test-{uuid.uuid4().hex}"


@pytest.fixture
def auth_queries(settings) -> int:
    """SQL statements every authenticated request costs before its view runs.

    Authentication (key lookup, last_used_at, request count): one statement. The
    rate limits (the client IP's failed authentications read, the key's count): Redis,
    or two SQL statements without Redis. Query budgets of views are
    `auth_queries + <the view's own>`.
    """
    authentication = 1
    rate_limit = 0 if settings.REDIS_URL else 2
    return authentication + rate_limit


@pytest.fixture
def live_db(transactional_db):
    """Committed rows that other threads and processes (live server, workers) can see,
    with the plan catalog present."""
    plan_catalog_ensure()


pytest_plugins = [
    "tests.support.database",
    "tests.support.redis_server",
    "tests.support.localstripe",
    "tests.support.receiver",
    "tests.support.celery_worker",
    "tests.support.smtp",
    "tests.support.pgbouncer",
    "tests.support.netns",
    "tests.support.dns",
    "tests.support.dns_server",
    "tests.support.embedded",
    "tests.support.oauth_provider",
    "tests.support.event_schemas",
]
