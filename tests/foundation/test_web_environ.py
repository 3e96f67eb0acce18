"""What the process environment leaves in a request's environ under the web server
the Procfile starts: none of its variables (granian copies os.environ into every
request's environ; config/wsgi.py drops them), so DATABASE_URL and SECRET_KEY never
reach request.META, nor an error report that shows it."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from tests.accounts.test_rate_limit_server import _stop
from tests.support.database import live_database_url
from tests.support.embedded import ROOT
from tests.support.ports import free_port, wait_for_port

SECRET = "environ-test-secret-key-0123456789-abcdefghijklmnopqrstuvwxyz"


@pytest.mark.usefixtures("live_db")
def test_process_variables_never_reach_request_meta():
    port = free_port()
    web_line = re.search(r"^web:\s*(.+)$", (ROOT / "Procfile").read_text(), re.MULTILINE)
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env |= {
        "DJANGO_SETTINGS_MODULE": "tests.support.environ_settings",
        "DATABASE_URL": live_database_url(),
        "SECRET_KEY": SECRET,
        "BIND": f"127.0.0.1:{port}",
        "WEB_CONCURRENCY": "1",
        "LOG_LEVEL": "warning",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        # A process variable named as a header's CGI name, which the request does not send.
        "HTTP_X_FORWARDED_FOR": "10.9.8.7",
    }
    process = subprocess.Popen(["sh", "-c", web_line.group(1)], cwd=ROOT, env=env)
    try:
        wait_for_port(port, timeout=60, process=process)
        response = requests.get(
            f"http://127.0.0.1:{port}/environ?q=1", headers={"X-Probe": "seen"}, timeout=30
        )
    finally:
        _stop(process)
    assert response.status_code == 200
    meta = response.json()
    # The request's own data is there...
    assert meta["HTTP_X_PROBE"] == "seen"
    assert meta["QUERY_STRING"] == "q=1"
    assert meta["REQUEST_METHOD"] == "GET"
    # ...and nothing of the process environment.
    for name in ("DATABASE_URL", "SECRET_KEY", "PATH", "DJANGO_SETTINGS_MODULE", "BIND"):
        assert name not in meta
    assert "HTTP_X_FORWARDED_FOR" not in meta
    assert SECRET not in meta.values()
    assert live_database_url() not in meta.values()
