"""Shared fixtures: an account with a key, and API clients for it, for another
account, and for nobody."""

import importlib

import pytest
from django.apps import apps
from rest_framework.test import APIClient

from accounts.services import api_key_create
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


# --- plan catalog for transactional tests (sending) ---
def plan_catalog_ensure() -> None:
    """Re-create the plan catalog of the data migration (idempotent). A transactional test
    (django_db(transaction=True)) flushes every table when it ends, catalog included, and
    with --reuse-db the next session would start without it."""
    importlib.import_module("plans.migrations.0002_catalog").create_catalog(apps, None)


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        plan_catalog_ensure()


@pytest.fixture
def live_db(transactional_db):
    """transactional_db (committed rows other processes can see) with the plan catalog."""
    plan_catalog_ensure()


# --- end plan catalog ---


pytest_plugins = [
    "tests.support.localstripe",
    "tests.support.receiver",
    "tests.support.celery_worker",
    "tests.support.smtp",
]
