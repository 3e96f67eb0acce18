"""The per-key limit is exact across processes: the real web server with several
workers, a burst of parallel requests on one key, exactly 60 pass."""

import os
import re
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

from accounts.services import api_key_create
from tests.accounts.factories import AccountFactory
from tests.support.database import live_database_url
from tests.support.ports import free_port, wait_for_port

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
BURST = 80
WORKERS = 3


def _server_env(**overrides) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env["DJANGO_SETTINGS_MODULE"] = "config.settings_test"
    env.update({k: v for k, v in overrides.items() if v is not None})
    return env


def _web(env: dict, embedded: bool = False):
    """The Procfile's web line with several workers; `embedded`: under the embedded
    PostgreSQL of the environment's VAR_DIR, as make run runs it."""
    port = free_port()
    wrapper = [sys.executable, "-m", "config.embedded_db", "run", "--"] if embedded else []
    web_line = re.search(r"^web:\s*(.+)$", (ROOT / "Procfile").read_text(), re.MULTILINE)
    env = env | {"BIND": f"127.0.0.1:{port}", "WEB_CONCURRENCY": str(WORKERS)}
    env.setdefault("LOG_LEVEL", "warning")
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    process = subprocess.Popen(wrapper + ["sh", "-c", web_line.group(1)], cwd=ROOT, env=env)
    try:
        wait_for_port(port, timeout=60, process=process)
    except (TimeoutError, ChildProcessError):
        process.kill()
        raise
    return process, f"http://127.0.0.1:{port}"


def _burst(base_url: str, plaintext: str) -> Counter:
    session_headers = {"Authorization": f"Bearer {plaintext}"}

    def call(_):
        return requests.get(f"{base_url}/api_keys", headers=session_headers, timeout=30).status_code

    with ThreadPoolExecutor(BURST) as pool:
        return Counter(pool.map(call, range(BURST)))


def _stop(process):
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.mark.usefixtures("live_db")
@pytest.mark.parametrize("store", ["redis", "sql"])
def test_exactly_60_of_a_burst_pass_across_workers_on_postgresql(store, settings, request):
    redis_url = request.getfixturevalue("redis_url") if store == "redis" else None
    plaintext = api_key_create(account=AccountFactory(), label="burst").plaintext
    env = _server_env(
        DATABASE_URL=live_database_url(),
        REDIS_URL=redis_url,
        RATE_LIMIT_KEY_PREFIX=settings.RATE_LIMIT_KEY_PREFIX,
    )
    process, url = _web(env)
    try:
        statuses = _burst(url, plaintext)
    finally:
        _stop(process)
    assert statuses == Counter({200: 60, 429: BURST - 60})


def test_exactly_60_of_a_burst_pass_across_workers_in_embedded_mode(tmp_path):
    """The embedded PostgreSQL under VAR_DIR, no Redis: the SQL upsert is the shared
    counter."""
    env = _server_env(VAR_DIR=str(tmp_path), CELERY_BROKER_URL=None)
    env.pop("CELERY_BROKER_URL", None)
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=120,
    )
    process, url = _web(env, embedded=True)
    try:
        signup = requests.post(f"{url}/signup", json={"email": "burst@example.com"}, timeout=30)
        assert signup.status_code == 201, signup.text
        statuses = _burst(url, signup.json()["api_key"]["plaintext"])
    finally:
        _stop(process)
    assert statuses == Counter({200: 60, 429: BURST - 60})
