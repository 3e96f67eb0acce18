"""Health, schema, docs and the admin."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection
from drf_spectacular.validation import validate_schema

from plans.models import Plan
from tests.accounts.factories import AccountFactory

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.django_db


def test_health_ok(anon_client):
    response = anon_client.get("/health")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "checks": {"database": "ok", "broker": "ok"}}


def _health_in_subprocess(**env_overrides) -> tuple[int, dict]:
    """GET /health in a fresh process whose settings point at a dead peer."""
    code = (
        "import django, json; django.setup();"
        "from django.test import Client;"
        "r = Client().get('/health');"
        "print(json.dumps([r.status_code, r.json()]))"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings_test", **env_overrides}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    status, body = json.loads(out.stdout.strip().splitlines()[-1])
    return status, body


def test_health_503_when_database_unreachable():
    # Port 1 on loopback: nothing listens there, so the connection is refused.
    status, body = _health_in_subprocess(DATABASE_URL="postgres://postgres@127.0.0.1:1/nothing")
    assert status == 503
    assert body["status"] == "unavailable"
    assert body["checks"]["database"] == "unavailable"


def test_health_503_when_broker_unreachable():
    status, body = _health_in_subprocess(CELERY_BROKER_URL="redis://127.0.0.1:1/0")
    assert status == 503
    assert (
        body["checks"] == {"database": "ok", "broker": "unavailable"}
        or body["checks"]["broker"] == "unavailable"
    )


def test_schema_is_valid_openapi_3(anon_client):
    response = anon_client.get("/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    schema = response.json()
    validate_schema(schema)
    assert schema["openapi"].startswith("3.")
    assert "/plans" in schema["paths"]
    assert schema["components"]["schemas"]["Error"]["required"] == ["code", "type", "message"]
    plans_get = schema["paths"]["/plans"]["get"]
    assert plans_get["responses"]["default"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Error"
    }


def test_docs_page_renders(anon_client):
    response = anon_client.get("/docs")
    assert response.status_code == 200
    assert b"swagger" in response.content.lower()


@pytest.mark.parametrize(
    "url", ["/admin/", "/admin/plans/plan/", "/admin/accounts/account/", "/admin/plans/plan/add/"]
)
def test_admin_pages_load_for_staff(admin_client, url):
    AccountFactory()
    assert admin_client.get(url).status_code == 200


def test_admin_shows_accounts_on_a_plan(admin_client):
    account = AccountFactory(email="on-free@example.com")
    free = Plan.objects.get(slug="free")
    page = admin_client.get(f"/admin/plans/plan/{free.pk}/change/").content.decode()
    assert account.email in page


def test_admin_archives_plans(admin_client):
    pro = Plan.objects.get(slug="pro")
    response = admin_client.post(
        "/admin/plans/plan/", {"action": "archive", "_selected_action": [pro.pk]}, follow=True
    )
    assert response.status_code == 200
    pro.refresh_from_db()
    assert pro.archived_at is not None


def test_admin_creates_a_private_plan(admin_client):
    response = admin_client.post(
        "/admin/plans/plan/add/",
        {
            "slug": "acme",
            "name": "Acme",
            "tier": 4,
            "monthly_limit": 500000,
            "psp_price_id": "price_acme",
        },
    )
    assert response.status_code == 302, response.content
    plan = Plan.objects.get(slug="acme")
    assert plan.public is False
    assert plan.monthly_limit == 500000


def test_admin_requires_staff(client):
    response = client.get("/admin/")
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]


KEYS = {
    "SECRET_KEY": "s" * 50,
    "FIELD_ENCRYPTION_KEY": "dGVzdC1vbmx5LWZpZWxkLWtleS0wMDAwMDAwMDAwMDA=",
}


def _import_production_settings(
    code: str = "import config.settings", unset: tuple = tuple(KEYS), **env
) -> subprocess.CompletedProcess:
    """`code` run in a fresh interpreter against production settings (DATABASE_URL set),
    with `env` set and the variables of `unset` removed from this environment."""
    clean = {k: v for k, v in os.environ.items() if k not in unset}
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**clean, "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/unused", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("missing", ["SECRET_KEY", "FIELD_ENCRYPTION_KEY"])
def test_production_refuses_to_start_without_its_secrets(missing):
    given = dict(KEYS)
    given.pop(missing)
    out = _import_production_settings(**given)
    assert out.returncode != 0
    assert f"{missing} must be set when DATABASE_URL is set" in out.stderr


def test_production_starts_with_its_secrets():
    out = _import_production_settings(**KEYS)
    assert out.returncode == 0, out.stderr


def test_embedded_mode_generates_and_keeps_its_secrets(tmp_path):
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SECRET_KEY", "FIELD_ENCRYPTION_KEY", "DATABASE_URL", "REDIS_URL")
    }
    code = "from config import settings as s; print(s.SECRET_KEY); print(s.FIELD_ENCRYPTION_KEY)"
    runs = [
        subprocess.run(
            [sys.executable, "-c", code],
            cwd=ROOT,
            env={**clean, "VAR_DIR": str(tmp_path)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        for _ in range(2)
    ]
    assert all(run.returncode == 0 for run in runs), runs[0].stderr
    assert runs[0].stdout == runs[1].stdout  # kept, not regenerated
    secret_key, field_key = runs[0].stdout.split()
    assert (tmp_path / "secret_key").read_text().strip() == secret_key
    assert oct((tmp_path / "secret_key").stat().st_mode & 0o777) == "0o600"
    assert len(field_key) == 44  # urlsafe base64 of 32 bytes: a Fernet key


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, {"server_side_binding": True, "prepare_threshold": 5}),
        (
            {"DB_PREPARED_STATEMENTS": "false"},
            {"server_side_binding": True, "prepare_threshold": None},
        ),
        (
            {"DB_SERVER_SIDE_BINDING": "false"},
            {"server_side_binding": False, "prepare_threshold": 5},
        ),
    ],
)
def test_postgresql_statement_preparation_is_configurable(env, expected):
    code = (
        "import json; from config import settings as s; "
        "o = s.DATABASES['default']['OPTIONS']; "
        "print(json.dumps({k: o[k] for k in ('server_side_binding', 'prepare_threshold')}))"
    )
    unset = ("DB_PREPARED_STATEMENTS", "DB_SERVER_SIDE_BINDING")
    out = _import_production_settings(code, unset, **KEYS, **env)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == expected


@pytest.mark.parametrize(("value", "disabled"), [(None, False), ("false", True), ("true", False)])
def test_server_side_cursors_can_be_turned_off_for_a_transaction_pooler(value, disabled):
    env = {} if value is None else {"DB_SERVER_SIDE_CURSORS": value}
    code = (
        "from config import settings as s; "
        "print(s.DATABASES['default']['DISABLE_SERVER_SIDE_CURSORS'])"
    )
    out = _import_production_settings(code, ("DB_SERVER_SIDE_CURSORS",), **KEYS, **env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(disabled)


def test_a_statement_run_often_on_a_connection_is_prepared(api_client, account):
    for _ in range(7):  # more than prepare_threshold (5)
        assert api_client.get("/api_keys").status_code == 200
    assert not Plan.objects.filter(slug="none-once").exists()  # run once: not prepared
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        prepared = [row[0] for row in cursor.fetchall()]
    # The authentication statement and the list's SELECT are parsed once.
    assert any("last_used_at" in statement for statement in prepared), prepared
    assert any(
        statement.startswith("SELECT") and "accounts_apikey" in statement for statement in prepared
    ), prepared
    assert not [statement for statement in prepared if '"plans_plan"."slug"' in statement]


@pytest.mark.parametrize(("given", "used"), [("500", 500), ("50000", 10_000), ("0", 1)])
def test_the_import_batch_size_is_bounded(given, used):
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "from config import settings; print(settings.CONTACT_IMPORT_BATCH_SIZE)",
        ],
        cwd=ROOT,
        env={**os.environ, "CONTACT_IMPORT_BATCH_SIZE": given},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) == used


def test_a_process_that_never_imported_the_tasks_still_queues_them():
    """The web process imports no task module of outreach (CELERY_IMPORTS is the worker's):
    a dispatch's immediate scheduler run and a webhook's drain are queued by name."""
    code = "\n".join(
        [
            "import sys, django",
            "django.setup()",
            "from celery import current_app",
            "sent = []",
            "current_app.send_task = lambda name, *args, **kwargs: sent.append(name)",
            "from outreach.campaigns.dispatch import sends_schedule_soon",
            "from webhooks.events import drains_publish",
            "assert 'outreach.sending.beat' not in sys.modules",
            "sends_schedule_soon()",
            "drains_publish(webhook_ids=['00000000-0000-0000-0000-000000000001'])",
            "print(sent)",
        ]
    )
    out = _import_production_settings(
        code,
        **KEYS,
        DJANGO_SETTINGS_MODULE="config.settings",
        CELERY_TASK_ALWAYS_EAGER="false",
        SENDING_SCHEDULE_ON_DISPATCH="true",
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(
        ["outreach.tasks.schedule_sends", "webhooks.tasks.webhook_drain"]
    )
    assert "not rung" not in out.stderr
