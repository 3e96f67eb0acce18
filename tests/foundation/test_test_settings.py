"""The test settings' Redis database per test process, seen by the processes a test
starts (Celery workers): the same database as the test process, not one further on."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Loads the test settings, then starts a child that loads them again (as a worker
# subprocess does, inheriting the environment), and prints both Redis URLs.
CODE = """
import os, subprocess, sys
from django.conf import settings
mine = settings.REDIS_URL  # loads the settings (and rewrites REDIS_URL) before the child
child = subprocess.run(
    [sys.executable, "-c", "from django.conf import settings; print(settings.REDIS_URL)"],
    env=os.environ, capture_output=True, text=True, check=True,
)
print(mine, child.stdout.strip())
"""


@pytest.mark.parametrize(
    ("given", "worker", "expected"),
    [
        ("redis://127.0.0.1:6379/0", "gw0", "redis://127.0.0.1:6379/8"),
        ("redis://127.0.0.1:6379/0", "gw1", "redis://127.0.0.1:6379/9"),
        ("redis://127.0.0.1:6379/12", "gw1", "redis://127.0.0.1:6379/13"),
    ],
)
def test_a_worker_subprocess_uses_its_test_processs_redis_database(given, worker, expected):
    names = ("REDIS_URL", "TEST_REDIS_URL_GIVEN", "PYTEST_XDIST_WORKER")
    env = {k: v for k, v in os.environ.items() if k not in names}
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings_test",
            "REDIS_URL": given,
            "PYTEST_XDIST_WORKER": worker,
        }
    )
    out = subprocess.run(
        [sys.executable, "-c", CODE],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert out.stdout.split() == [expected, expected]
