"""No plaintext API key is stored in any database column or written to the logs."""

import logging

import pytest
from django.apps import apps
from django.db import connection

from tests.conftest import client_for

pytestmark = pytest.mark.django_db


def _every_text_value() -> list[str]:
    """Every value of every column of every table, as text."""
    values = []
    with connection.cursor() as cursor:
        for model in apps.get_models(include_auto_created=True):
            table = connection.ops.quote_name(model._meta.db_table)
            cursor.execute(f"SELECT * FROM {table}")  # noqa: S608 (our own table names)
            for row in cursor.fetchall():
                for value in row:
                    if isinstance(value, bytes | memoryview):
                        value = bytes(value).decode("latin-1")
                    values.append(str(value))
    return values


@pytest.fixture
def sql_logged():
    """Log every SQL statement with its parameters (django.db.backends, DEBUG)."""
    connection.force_debug_cursor = True
    yield
    connection.force_debug_cursor = False


def test_no_plaintext_key_in_the_database_or_the_logs(anon_client, caplog, sql_logged):
    # Django's own loggers default to INFO: open them up to DEBUG as well.
    with caplog.at_level(logging.DEBUG), caplog.at_level(logging.DEBUG, logger="django"):
        first = anon_client.post("/signup", {"email": "secret@example.com"}, format="json").json()
        first_key = first["api_key"]["plaintext"]
        client = client_for(first_key)
        second_key = client.post(
            "/api_keys", {"label": "second"}, format="json", HTTP_IDEMPOTENCY_KEY="once"
        ).json()["plaintext"]
        replayed = client.post(
            "/api_keys", {"label": "second"}, format="json", HTTP_IDEMPOTENCY_KEY="once"
        ).json()["plaintext"]
        assert replayed == second_key
        for _ in range(3):
            assert client_for(second_key).get("/api_keys").status_code == 200
        client_for(first_key[:-1] + "x").get("/api_keys")  # A failed attempt too.
    values = _every_text_value()
    logged = caplog.text + "".join(str(r.args) for r in caplog.records)
    assert "key_hash" in logged, "the SQL statements were expected in the captured logs"
    for plaintext in (first_key, second_key):
        suffix = plaintext[12:]  # Everything past the public prefix.
        assert not any(suffix in value for value in values)
        assert suffix not in logged
