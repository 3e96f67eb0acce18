"""A service that cannot start says why in one line: a missing setting, a database that
does not exist. No traceback, from manage.py, the web server or Celery."""

import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.db import connection

from tests.support.database import live_database_url

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
FIELD_KEY = "dGVzdC1vbmx5LWZpZWxkLWtleS0wMDAwMDAwMDAwMDA="


def _run(command: list[str], **env) -> subprocess.CompletedProcess:
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in {"SECRET_KEY", "FIELD_ENCRYPTION_KEY", "DJANGO_SETTINGS_MODULE"}
    }
    return subprocess.run(
        command,
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


PRODUCTION = {"DATABASE_URL": "postgres://postgres@127.0.0.1:1/outreach"}


def test_manage_py_without_secret_key_says_so_in_one_line():
    result = _run([sys.executable, "manage.py", "migrate"], **PRODUCTION)
    assert result.returncode == 1
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(
        "manage.py: configuration error: SECRET_KEY must be set when DATABASE_URL is set"
    )
    assert "secrets.token_urlsafe(50)" in lines[0]


def test_manage_py_without_field_encryption_key_says_so_in_one_line():
    result = _run([sys.executable, "manage.py", "check"], SECRET_KEY="s" * 50, **PRODUCTION)
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert "FIELD_ENCRYPTION_KEY must be set when DATABASE_URL is set" in lines[0]


@pytest.mark.parametrize("program", ["worker", "beat"])
def test_celery_without_secret_key_says_so_in_one_line(program):
    result = _run([str(BIN / "celery"), "-A", "config", program], **PRODUCTION)
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert lines == [lines[0]], result.stderr
    assert lines[0].startswith("celery: configuration error: SECRET_KEY must be set")


def test_the_web_without_secret_key_stops_with_one_line_and_no_traceback():
    web_line = re.search(r"^web:\s*(.+)$", (ROOT / "Procfile").read_text(), re.MULTILINE)
    result = _run(
        ["sh", "-c", web_line[1]],
        BIND="127.0.0.1:0",
        WEB_CONCURRENCY="1",
        PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}",
        **PRODUCTION,
    )
    assert result.returncode == 1  # the worker could not load: the server stops
    assert "Traceback" not in result.stderr
    assert "web: configuration error: SECRET_KEY must be set" in result.stderr


def test_manage_py_with_an_unreachable_database_says_so_in_one_line():
    result = _run(
        [sys.executable, "manage.py", "migrate"],
        SECRET_KEY="s" * 50,
        FIELD_ENCRYPTION_KEY=FIELD_KEY,
        **PRODUCTION,
    )
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("manage.py: cannot connect to the database of DATABASE_URL: ")
    assert "127.0.0.1" in lines[0]


def test_manage_py_with_a_missing_database_says_how_to_create_it():
    url = urlsplit(live_database_url())
    missing = urlunsplit(url._replace(path="/outreach_does_not_exist_here"))
    params = connection.settings_dict
    result = _run(
        [sys.executable, "manage.py", "migrate"],
        DATABASE_URL=missing,
        SECRET_KEY="s" * 50,
        FIELD_ENCRYPTION_KEY=FIELD_KEY,
    )
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert 'database "outreach_does_not_exist_here" does not exist' in lines[0]
    assert lines[0].endswith(
        f"create it first: createdb -h {params['HOST'] or '127.0.0.1'} -p {params['PORT'] or 5432}"
        f" -U {params['USER']} outreach_does_not_exist_here"
    )


def test_manage_py_test_says_to_use_make_test(tmp_path):
    result = _run([sys.executable, "manage.py", "test"], VAR_DIR=str(tmp_path), DATABASE_URL="")
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "CommandError: the test suite runs with pytest, not manage.py test: use `make test` "
        "(options through PYTEST_ARGS), or .venv/bin/pytest directly."
    )


def _embedded_check(tmp_path, **env) -> subprocess.CompletedProcess:
    """`manage.py check` in the embedded mode, with these variables set."""
    return _run(
        [sys.executable, "manage.py", "check"], VAR_DIR=str(tmp_path), DATABASE_URL="", **env
    )


def test_trusted_proxy_count_alone_stops_with_what_to_set(tmp_path):
    # It used to trust X-Forwarded-For from any peer; the proxies must now be named.
    result = _embedded_check(tmp_path, TRUSTED_PROXY_COUNT="1")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "manage.py: configuration error: TRUSTED_PROXY_COUNT is no longer used: set "
        "TRUSTED_PROXIES to the addresses or networks your reverse proxies connect from "
        "(comma-separated, e.g. TRUSTED_PROXIES=10.0.0.0/8), and unset TRUSTED_PROXY_COUNT."
    ]


def test_a_malformed_trusted_proxy_stops_with_one_line(tmp_path):
    result = _embedded_check(tmp_path, TRUSTED_PROXIES="10.0.0.1,proxy.internal")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "manage.py: configuration error: TRUSTED_PROXIES: 'proxy.internal' is not an IP "
        "address or network (CIDR)."
    ]


def test_trusted_proxies_beside_the_old_count_start(tmp_path):
    result = _embedded_check(
        tmp_path, TRUSTED_PROXIES="10.0.0.0/8, 192.0.2.1", TRUSTED_PROXY_COUNT="1"
    )
    assert result.returncode == 0, result.stderr
