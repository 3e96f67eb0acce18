"""Logs a person can read: quiet when idle, one line per request, no token or secret in
any line, a clean Ctrl-C, JSON with LOG_FORMAT=json."""

import io
import json
import logging
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid

import pytest
from django.core import signing

from config import embedded_db
from config.logs import JsonFormatter, LineFilter, logging_config, redact
from config.request_id import REQUEST_ID
from outreach.sending import tokens
from tests.support.embedded import (
    ROOT,
    TEST_SETTINGS_ENV,
    embedded_env,
    embedded_migrate,
    procfile_processes,
)
from tests.support.ports import free_port, wait_for_port
from webhooks.secrets import secret_generate

RECEIVED = "Task %(name)s[%(id)s] received"
SUCCEEDED = "Task %(name)s[%(id)s] succeeded in %(runtime)ss: %(return_value)s"
ROOT_WARNING = "You're running the worker with superuser privileges"


def _record(msg, args=None, level=logging.INFO, name="celery.app.trace") -> logging.LogRecord:
    record = logging.LogRecord(name, level, __file__, 1, msg, None, None)
    record.args = args  # a dict, as Celery passes it
    return record


@pytest.fixture
def quiet():
    logging.getLogger("celery.app.trace").setLevel(logging.INFO)
    yield LineFilter(periodic_tasks=["outreach.tasks.schedule_sends"], filesystem_broker=True)
    logging.getLogger("celery.app.trace").setLevel(logging.NOTSET)


def test_an_idle_periodic_task_is_debug(quiet):
    args = {"name": "outreach.tasks.schedule_sends", "id": "1", "runtime": 0.01}
    for nothing in ("0", "None"):
        record = _record(SUCCEEDED, {**args, "return_value": nothing})
        assert quiet.filter(record) is False  # dropped at INFO
        assert record.levelname == "DEBUG"


def test_a_periodic_task_that_did_work_stays_info(quiet):
    args = {"name": "outreach.tasks.schedule_sends", "id": "1", "runtime": 0.01}
    record = _record(SUCCEEDED, {**args, "return_value": "3"})
    assert quiet.filter(record) is True
    assert record.levelname == "INFO"


def test_other_tasks_log_one_line_when_done(quiet):
    received = _record(RECEIVED, {"name": "outreach.tasks.send_batch", "id": "1"})
    done = _record(
        SUCCEEDED,
        {"name": "outreach.tasks.send_batch", "id": "1", "runtime": 1, "return_value": "None"},
    )
    assert quiet.filter(received) is False
    assert quiet.filter(done) is True


def test_beats_sending_line_is_debug_and_shown_at_debug(quiet):
    record = _record("Scheduler: Sending due task %s (%s)", ("a", "b"), name="celery.beat")
    logging.getLogger("celery.beat").setLevel(logging.DEBUG)
    try:
        assert quiet.filter(record) is True
        assert record.levelname == "DEBUG"
    finally:
        logging.getLogger("celery.beat").setLevel(logging.NOTSET)


def test_failures_are_untouched(quiet):
    record = _record("Task %(name)s[%(id)s] %(description)s: %(exc)s", {}, level=logging.ERROR)
    assert quiet.filter(record) is True
    assert record.levelname == "ERROR"


def test_tokens_keys_and_secrets_are_redacted():
    pixel = tokens.token_make(purpose=tokens.OPEN, enrollment_id=uuid.uuid4())
    unsubscribe = tokens.token_make(purpose=tokens.UNSUBSCRIBE, enrollment_id=uuid.uuid4())
    line = (
        f'"GET /t/o/{pixel}.gif HTTP/1.1" "POST /u/{unsubscribe} HTTP/1.1" '
        f'"https://x.example/u/{unsubscribe}" Bearer ak_live_{"A" * 43} whsec_{"b" * 32}'
    )
    assert redact(line) == (
        '"GET /t/o/[redacted].gif HTTP/1.1" "POST /u/[redacted] HTTP/1.1" '
        '"https://x.example/u/[redacted]" Bearer ak_live_AAAA[redacted] whsec_[redacted]'
    )


def test_a_standard_base64_webhook_secret_is_redacted_whole():
    secret = secret_generate()  # standard base64: may hold +, / and =
    assert redact(f"secret={secret} done") == "secret=whsec_[redacted] done"
    assert redact("whsec_ab+c/d= x") == "whsec_[redacted] x"


def test_the_signup_verification_link_is_redacted():
    token = signing.dumps({"a": uuid.uuid4().hex, "e": "a@example.com"}, salt="accounts.x")
    line = f'"POST /signup/verify/{token} HTTP/1.1" 200 "http://x.example/signup/verify/{token}"'
    assert redact(line) == (
        '"POST /signup/verify/[redacted] HTTP/1.1" 200 "http://x.example/signup/verify/[redacted]"'
    )
    assert redact("POST /signup/verification") == "POST /signup/verification"


def test_the_filter_rewrites_the_formatted_message():
    record = _record("Not Found: %s", ("/u/abc.def",), name="django.request")
    assert LineFilter().filter(record) is True
    assert record.getMessage() == "Not Found: /u/[redacted]"


def test_the_console_handler_of_every_process_redacts_demotes_and_names_the_request():
    # The LOGGING setting's console handler, built from its entries as dictConfig does.
    config = logging_config(
        level="INFO",
        json_format=False,
        periodic_tasks=["outreach.tasks.schedule_sends"],
        filesystem_broker=False,
    )
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    for name in config["handlers"]["console"]["filters"]:
        options = dict(config["filters"][name])
        handler.addFilter(options.pop("()")(**options))
    handler.setFormatter(config["formatters"]["default"]["()"]())
    logging.getLogger("celery.app.trace").setLevel(logging.INFO)
    try:
        handler.handle(_record("Not Found: %s", ("/u/abc.def",), name="django.request"))
        idle = {"name": "outreach.tasks.schedule_sends", "id": "1", "runtime": 0, "return_value": 0}
        handler.handle(_record(SUCCEEDED, idle))
    finally:
        logging.getLogger("celery.app.trace").setLevel(logging.NOTSET)
    token = REQUEST_ID.set("req-1")
    try:
        handler.handle(_record("whsec_abc rotated", name="webhooks.services"))
    finally:
        REQUEST_ID.reset(token)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2  # the idle task's line dropped
    assert lines[0].endswith(" INFO django.request Not Found: /u/[redacted]")
    assert lines[1].endswith(" webhooks.services whsec_[redacted] rotated request_id=req-1")


def test_json_lines():
    record = _record("hello %s", ("world",), level=logging.WARNING, name="outreach.sending")
    entry = json.loads(JsonFormatter().format(record))
    assert entry["level"] == "WARNING"
    assert entry["logger"] == "outreach.sending"
    assert entry["message"] == "hello world"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", entry["time"])


# --- the web server as the Procfile starts it ---


def _get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 (loopback)
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


@pytest.fixture
def web(tmp_path):
    started = []

    def start(**env):
        port = free_port()
        log = tmp_path / f"web{len(started)}.log"
        env = embedded_env(tmp_path / "var", f"127.0.0.1:{port}", {"WEB_CONCURRENCY": "1"} | env)
        embedded_migrate(env)
        web_line = re.search(r"^web:\s*(.+)$", (ROOT / "Procfile").read_text(), re.MULTILINE)
        process = subprocess.Popen(
            [sys.executable, "-m", "config.embedded_db", "run", "--", "sh", "-c", web_line[1]],
            cwd=ROOT,
            env=env,
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
        )
        started.append(process)
        wait_for_port(port, process=process)
        return f"http://127.0.0.1:{port}", log

    yield start
    for process in started:
        process.terminate()
        process.wait(timeout=30)


def _lines_after(log, marker: str, count: int, timeout: float = 10.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log.read_text()
        if marker in text:
            lines = text[text.index(marker) :].splitlines()[1:]
            if len(lines) >= count:
                time.sleep(0.3)  # anything more would be a second line for one request
                return log.read_text()[text.index(marker) :].splitlines()[1:]
        time.sleep(0.05)
    raise AssertionError(log.read_text())


def test_the_web_logs_one_redacted_line_per_request(web):
    url, log = web()
    pixel = tokens.token_make(purpose=tokens.OPEN, enrollment_id=uuid.uuid4())
    unsubscribe = tokens.token_make(purpose=tokens.UNSUBSCRIBE, enrollment_id=uuid.uuid4())
    assert _get(f"{url}/nope") == 404
    assert _get(f"{url}/t/o/{pixel}.gif") == 200
    assert _get(f"{url}/u/{unsubscribe}") == 404  # signed with another key: not ours
    lines = _lines_after(log, "Started worker", 3)
    assert len(lines) == 3, lines  # one line each, no second line for the 404
    assert re.fullmatch(r'\S+ \S+ INFO web.access 127.0.0.1 "GET /nope HTTP/1.1" 404 .*', lines[0])
    assert '"GET /t/o/[redacted].gif HTTP/1.1" 200' in lines[1]
    assert '"GET /u/[redacted] HTTP/1.1"' in lines[2]
    assert pixel not in log.read_text() and unsubscribe not in log.read_text()


def test_the_web_logs_json_with_log_format_json(web):
    url, log = web(LOG_FORMAT="json")
    assert _get(f"{url}/nope") == 404
    lines = _lines_after(log, "Started worker", 1)
    access = [json.loads(line) for line in lines if "web.access" in line]
    assert len(access) == 1
    assert access[0]["level"] == "INFO"
    assert access[0]["message"].startswith('127.0.0.1 "GET /nope HTTP/1.1" 404 ')
    for line in log.read_text().splitlines():
        json.loads(line)  # the server's own lines too


# --- the whole service, as `make run` starts it ---


@pytest.mark.e2e
def test_make_runs_processes_are_quiet_when_idle_and_stop_cleanly_on_ctrl_c(embedded_service):
    service = embedded_service(
        env={"SENDING_SCHEDULE_INTERVAL_SECONDS": "1", "WEBHOOK_SWEEP_INTERVAL_SECONDS": "1"}
    )
    # The banner said what the embedded mode allows; no process repeats it.
    assert service.log.startswith("Outreach service: embedded mode (development)")
    assert "OUTBOUND_ALLOW_PRIVATE_NETWORKS=true" in service.log.split(" started (pid=")[0]
    assert "Embedded mode: OUTBOUND_ALLOW_PRIVATE_NETWORKS is on" not in service.log
    ready_at = len(service.log)
    time.sleep(6)  # six scheduler ticks, six webhook sweeps
    idle = service.log[ready_at:]
    assert "Sending due task" not in idle
    assert "received" not in idle and "succeeded" not in idle
    assert _get(f"{service.url}/nope") == 404
    time.sleep(1)

    seconds = service.interrupt()
    assert seconds < 30
    log = service.log
    stopped = re.findall(r"system +\| (\w+)\.1 stopped \(rc=0\)\n", log)
    assert sorted(stopped) == sorted(procfile_processes())  # each stopped cleanly, itself
    assert re.search(r"rc=(?!0\))", log) is None
    assert service.process.returncode == 0  # so make says nothing (no "Error 130")
    assert ROOT_WARNING not in log
    if os.geteuid() == 0:  # the banner says it once instead
        assert "  Running as root: Celery's warning about it is left out" in log
    assert "SIGKILL" not in log
    assert " ERROR " not in log and "ERROR/" not in log
    assert "Traceback" not in log
    assert len(re.findall(r"/nope", log)) == 1
    # The database stopped last, cleanly, its data kept.
    data = embedded_db.data_dir(service.var_dir)
    assert f"embedded_db: PostgreSQL stopped; its data stays in {data}" in log
    assert embedded_db.server_pid(data) is None
    assert "database system is shut down" in (data / "log").read_text()


def _python_run(env: dict, code: str) -> subprocess.CompletedProcess:
    """`code` run by a fresh interpreter with the real settings and `env`."""
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**env, "DJANGO_SETTINGS_MODULE": "config.settings"},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )


def test_a_process_started_alone_in_the_embedded_mode_says_private_networks_are_on(tmp_path):
    env = embedded_env(tmp_path / "var", "127.0.0.1:8000")
    env.pop("STARTUP_BANNER_SHOWN")
    out = _python_run(env, "import django; django.setup()")
    assert out.stderr.count("Embedded mode: OUTBOUND_ALLOW_PRIVATE_NETWORKS is on") == 1


def _celery_worker_built(env: dict) -> str:
    """What a Celery worker prints while it starts (up to its check of privileges and
    the rest of its set-up, short of consuming): built as `celery worker` builds it."""
    out = _python_run(
        env,
        "from config.celery import app; from celery.apps.worker import Worker;"
        "Worker(app=app, hostname='probe@localhost', quiet=True)",
    )
    return out.stdout + out.stderr


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root")
def test_as_root_make_runs_celery_workers_leave_the_root_warning_to_the_banner(tmp_path):
    env = embedded_env(tmp_path / "var", "127.0.0.1:8000")
    assert ROOT_WARNING not in _celery_worker_built(env)
    # A worker started on its own (no banner said it) still warns.
    env.pop("STARTUP_BANNER_SHOWN")
    assert ROOT_WARNING in _celery_worker_built(env)


def test_the_embedded_service_runs_without_the_test_settings_environment():
    # Eager tasks or the test keys in make run's processes would test something else.
    env = embedded_env(ROOT / "var", "127.0.0.1:8000")
    assert {"SECRET_KEY", "CELERY_TASK_ALWAYS_EAGER", "SIGNUP_RATE_LIMIT"} <= TEST_SETTINGS_ENV
    assert not TEST_SETTINGS_ENV & set(env) - {"BASE_URL"}
