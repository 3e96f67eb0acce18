"""`make run`'s banner (manage.py banner) and the embedded mode's development defaults."""

import json
import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from plans.models import Plan

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.django_db


def _banner() -> str:
    out = StringIO()
    call_command("banner", stdout=out)
    return out.getvalue()


@pytest.fixture
def embedded(settings, tmp_path, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)  # not root, unless a test says so
    settings.EMBEDDED = True
    settings.VAR_DIR = tmp_path
    settings.EMBEDDED_DATABASE_DIR = tmp_path / "postgres"
    settings.BASE_URL = "http://127.0.0.1:8123"
    settings.STRIPE_SECRET_KEY = ""
    settings.OUTBOUND_ALLOW_PRIVATE_NETWORKS = True
    settings.SIGNUP_RATE_LIMIT = 100
    settings.SIGNUP_EMAIL_VERIFICATION = False
    settings.SMTP_REQUIRE_LOGIN = False
    Plan.objects.filter(tier__gt=0).update(psp_price_id=None)
    return settings


def test_it_says_where_the_api_docs_and_admin_are(embedded):
    text = _banner()
    assert text.splitlines()[:4] == [
        f"Outreach service: embedded mode (development), files under {embedded.VAR_DIR}",
        "  API    http://127.0.0.1:8123  (first steps: README, 'First ten minutes')",
        "  Docs   http://127.0.0.1:8123/docs",
        "  Admin  http://127.0.0.1:8123/admin/  (user: .venv/bin/python manage.py createsuperuser)",
    ]


def test_it_says_where_the_embedded_database_is_and_how_to_open_it(embedded, tmp_path):
    lines = _banner().splitlines()
    assert lines[4] == f"  Data   PostgreSQL in {tmp_path / 'postgres'}  (make clean removes it)"
    assert lines[5].startswith("  psql   ")
    assert lines[5].endswith(f"/psql -h {tmp_path / 'postgres'} -U postgres outreach")


def test_it_names_what_is_off_and_the_variable_for_each(embedded):
    text = _banner()
    assert "Off:\n" in text
    assert "  Stripe       STRIPE_SECRET_KEY unset: no customers, no checkout or portal\n" in text
    assert (
        "  Plan prices  hobby, pro, scale unpriced: GET /plans is empty, checkout refuses them\n"
        "               (STRIPE_PRICE_HOBBY, STRIPE_PRICE_PRO, STRIPE_PRICE_SCALE at the first "
        "migrate, or in the admin)\n"
    ) in text


def test_it_says_the_development_defaults_of_the_embedded_mode(embedded):
    text = _banner()
    assert text.endswith(
        "Development defaults (production keeps them strict):\n"
        "  Webhooks to private and loopback addresses allowed "
        "(OUTBOUND_ALLOW_PRIVATE_NETWORKS=true)\n"
        "  Signups: 100 per IP per hour, production 5 (SIGNUP_RATE_LIMIT)\n"
        "  Signups need no proof of address; production emails a link first "
        "(SIGNUP_EMAIL_VERIFICATION)\n"
        "  Mailboxes may send without a login; production requires one (SMTP_REQUIRE_LOGIN)\n"
        "  Recipient domains are not checked in DNS; production skips those without a "
        "mail server (RECIPIENT_DOMAIN_CHECK)\n"
    )


def test_as_root_it_says_so_once_for_the_celery_workers(embedded, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert _banner().endswith(
        "  Running as root: Celery's warning about it is left out; production runs "
        "its workers as a user of their own\n"
    )
    embedded.EMBEDDED = False  # production: Celery's own warning, in each worker
    assert "root" not in _banner()


def test_a_priced_plan_is_not_named_and_plans_is_not_said_empty(embedded):
    Plan.objects.filter(slug="hobby").update(psp_price_id="price_hobby")
    text = _banner()
    assert "pro, scale unpriced: GET /plans omits them, checkout refuses them" in text
    assert "(STRIPE_PRICE_PRO, STRIPE_PRICE_SCALE at the first migrate" in text


def test_an_empty_price_id_is_unpriced_as_checkout_says(embedded):
    """The banner names what checkout refuses: a price id stored empty is no price."""
    Plan.objects.filter(slug="hobby").update(psp_price_id="price_hobby")
    Plan.objects.filter(slug="pro").update(psp_price_id="")
    assert Plan.objects.get(slug="pro").unpurchasable_reason() == "unpriced"
    assert "pro, scale unpriced: GET /plans omits them" in _banner()


def test_with_stripe_and_every_price_nothing_is_off(embedded):
    embedded.STRIPE_SECRET_KEY = "sk_test_x"
    for plan in Plan.objects.filter(tier__gt=0):
        plan.psp_price_id = f"price_{plan.slug}"
        plan.save()
    assert "Off:" not in _banner()


def test_production_has_no_development_defaults(embedded):
    embedded.EMBEDDED = False
    embedded.OUTBOUND_ALLOW_PRIVATE_NETWORKS = False
    embedded.SIGNUP_EMAIL_VERIFICATION = embedded.SMTP_REQUIRE_LOGIN = True
    embedded.RECIPIENT_DOMAIN_CHECK = True
    text = _banner()
    assert text.startswith("Outreach service: production mode\n")
    assert "Development defaults" not in text
    assert text.endswith(
        "  Webhooks to private and loopback addresses refused "
        "(OUTBOUND_ALLOW_PRIVATE_NETWORKS=true for local trials)\n"
    )


def test_production_names_the_abuse_guards_an_operator_turned_off(embedded):
    embedded.EMBEDDED = False
    embedded.OUTBOUND_ALLOW_PRIVATE_NETWORKS = False
    text = _banner()
    assert (
        "  Signup proof SIGNUP_EMAIL_VERIFICATION=false: new accounts send without proving "
        "their address\n"
        "  SMTP login   SMTP_REQUIRE_LOGIN=false: mailboxes may send without a login\n"
        "  Recipients   RECIPIENT_DOMAIN_CHECK=false: addresses of domains without a mail "
        "server are imported and sent to\n"
    ) in text
    embedded.SIGNUP_EMAIL_VERIFICATION = embedded.SMTP_REQUIRE_LOGIN = True
    embedded.RECIPIENT_DOMAIN_CHECK = True
    assert "SIGNUP_EMAIL_VERIFICATION" not in _banner()
    assert "SMTP_REQUIRE_LOGIN" not in _banner()
    assert "RECIPIENT_DOMAIN_CHECK" not in _banner()


def test_the_embedded_mode_says_nothing_of_guards_turned_on(embedded):
    embedded.SIGNUP_EMAIL_VERIFICATION = embedded.SMTP_REQUIRE_LOGIN = True
    embedded.RECIPIENT_DOMAIN_CHECK = True
    assert "SIGNUP_EMAIL_VERIFICATION" not in _banner()
    assert "SMTP_REQUIRE_LOGIN" not in _banner()


def test_production_warns_when_private_networks_are_allowed(embedded):
    embedded.EMBEDDED = False
    embedded.SIGNUP_EMAIL_VERIFICATION = embedded.SMTP_REQUIRE_LOGIN = True
    embedded.RECIPIENT_DOMAIN_CHECK = True
    text = _banner()
    assert text.endswith(
        "Warning: webhooks to private and loopback addresses allowed "
        "(OUTBOUND_ALLOW_PRIVATE_NETWORKS=true): tests and local development only\n"
    )


def test_a_bind_other_than_the_base_url_is_said(embedded, monkeypatch):
    monkeypatch.setenv("BIND", "0.0.0.0:9000")
    assert "  Listening on 0.0.0.0:9000 (BIND); links use BASE_URL\n" in _banner()


def _settings_values(tmp_path, names: list[str], **env) -> list:
    """The values config.settings (not the test settings) gives these settings in a fresh
    process, with none of them set in the environment unless `env` sets it."""
    code = (
        "import json; from django.conf import settings;"
        f"print(json.dumps([getattr(settings, name) for name in {names!r}]))"
    )
    unset = ("DATABASE_URL", "REDIS_URL", *names)
    clean = {k: v for k, v in os.environ.items() if k not in unset}
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**clean, "DJANGO_SETTINGS_MODULE": "config.settings", "VAR_DIR": str(tmp_path), **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(out.stdout)


def _settings_of(tmp_path, **env) -> dict:
    names = ["OUTBOUND_ALLOW_PRIVATE_NETWORKS", "SIGNUP_RATE_LIMIT"]
    allow, signups = _settings_values(tmp_path, names, **env)
    return {"allow_private": allow, "signups": signups}


def test_the_embedded_mode_allows_private_webhooks_and_more_signups(tmp_path):
    assert _settings_of(tmp_path) == {"allow_private": True, "signups": 100}


def test_production_keeps_both_strict(tmp_path):
    production = {
        "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/outreach",
        "SECRET_KEY": "s" * 50,
        "FIELD_ENCRYPTION_KEY": "dGVzdC1vbmx5LWZpZWxkLWtleS0wMDAwMDAwMDAwMDA=",
    }
    assert _settings_of(tmp_path, **production) == {"allow_private": False, "signups": 5}


def test_both_can_be_set_either_way(tmp_path):
    assert _settings_of(
        tmp_path, OUTBOUND_ALLOW_PRIVATE_NETWORKS="false", SIGNUP_RATE_LIMIT="7"
    ) == {"allow_private": False, "signups": 7}


GUARDS = [
    "SIGNUP_EMAIL_VERIFICATION",
    "SMTP_REQUIRE_LOGIN",
    "DAILY_LIMIT_MAX",
    "EMAIL_BACKEND",
    "EMAIL_HOST",
    "EMAIL_PORT",
    "EMAIL_USE_TLS",
]
PRODUCTION = {
    "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/outreach",
    "SECRET_KEY": "s" * 50,
    "FIELD_ENCRYPTION_KEY": "dGVzdC1vbmx5LWZpZWxkLWtleS0wMDAwMDAwMDAwMDA=",
}
SMTP_BACKEND = "django.core.mail.backends.smtp.EmailBackend"


def test_production_guards_against_spraying_mail_and_the_embedded_mode_does_not(tmp_path):
    assert _settings_values(tmp_path, GUARDS, **PRODUCTION) == [
        True, True, 2000, SMTP_BACKEND, "localhost", 25, False,
    ]  # fmt: skip
    assert _settings_values(tmp_path, GUARDS[:4]) == [
        False, False, 2000, "django.core.mail.backends.console.EmailBackend",
    ]  # fmt: skip


def test_an_operator_sets_the_guards_and_the_mail_server(tmp_path):
    assert _settings_values(
        tmp_path,
        GUARDS,
        **PRODUCTION,
        SIGNUP_EMAIL_VERIFICATION="false",
        SMTP_REQUIRE_LOGIN="false",
        DAILY_LIMIT_MAX="99999999",  # at most 1,000,000
        EMAIL_URL="smtp+tls://user:pw@mail.example.com:587",
    ) == [False, False, 1_000_000, SMTP_BACKEND, "mail.example.com", 587, True]
