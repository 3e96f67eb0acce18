"""The README's configuration table is every variable the settings, the web server's
configuration (config/web.py) and the Procfile read: no more, no fewer."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Imports config/settings.py, then config/web.py (and makes its server), in a fresh process with os.environ
# (and django-environ's view of it) recording every name looked up, and prints them.
RECORD = """
import json, os, runpy, sys
import environ

# What the two import, imported first: their own reads are not the settings' (granian's
# reads its GRANIAN_* variables as its command line loads).
import config, config.logs, kombu
import granian.constants, granian.http, granian.server

read = set()

class Recording(dict):
    def __getitem__(self, key):
        read.add(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        read.add(key)
        return super().get(key, default)

    def __contains__(self, key):
        read.add(key)
        return super().__contains__(key)

recording = Recording(os.environ)
environ.Env.ENVIRON = recording
os.environ = recording
runpy.run_path("config/settings.py")
runpy.run_path("config/web.py")["server"]()
print(json.dumps(sorted(read)))
"""


def _settings_read(tmp_path, **env) -> set[str]:
    names = ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE")
    clean = {k: v for k, v in os.environ.items() if k not in names}
    out = subprocess.run(
        [sys.executable, "-c", RECORD],
        cwd=ROOT,
        env={**clean, "VAR_DIR": str(tmp_path), **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return set(json.loads(out.stdout))


def _procfile_read() -> set[str]:
    return set(re.findall(r"\$\{([A-Z_]+)", (ROOT / "Procfile").read_text()))


def _readme_table() -> set[str]:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Configuration") :]
    table = section[section.index("| Variable |") :]
    table = table[: table.index("\n\n")]
    names = set()
    for row in table.splitlines()[2:]:
        first_cell = row.split("|")[1]
        names |= set(re.findall(r"`([A-Z][A-Z0-9_]+)`", first_cell))
    return names


def test_the_readme_table_is_what_the_settings_the_web_server_and_the_procfile_read(tmp_path):
    embedded = _settings_read(tmp_path)
    production = _settings_read(
        tmp_path,
        DATABASE_URL="postgres://postgres@127.0.0.1:5432/outreach",
        REDIS_URL="redis://127.0.0.1:6379/0",
        SECRET_KEY="s" * 50,
        FIELD_ENCRYPTION_KEY="dGVzdC1vbmx5LWZpZWxkLWtleS0wMDAwMDAwMDAwMDA=",
    )
    # Read only without a connection pool.
    no_pool = _settings_read(
        tmp_path,
        DATABASE_URL="postgres://postgres@127.0.0.1:5432/outreach",
        SECRET_KEY="s" * 50,
        FIELD_ENCRYPTION_KEY="dGVzdC1vbmx5LWZpZWxkLWtleS0wMDAwMDAwMDAwMDA=",
        DB_POOL_MAX_SIZE="0",
    )
    read = embedded | production | no_pool | _procfile_read()
    documented = _readme_table()
    assert sorted(read - documented) == [], "read but not in the README's table"
    assert sorted(documented - read) == [], "in the README's table but read by nothing"


def test_the_recording_sees_what_it_should(tmp_path):
    # Guards the test above: names read in either mode, and through each reader.
    read = _settings_read(tmp_path)
    assert {"DATABASE_URL", "VAR_DIR", "SECRET_KEY", "ALLOWED_HOSTS", "LOG_LEVEL"} <= read
    assert {"WEB_THREADS", "WEB_CLIENT_TIMEOUT_SECONDS", "BIND", "WEB_CONCURRENCY"} <= read
    assert {"LOG_LEVEL", "VAR_DIR"} <= _procfile_read()
