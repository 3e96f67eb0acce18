"""A REAL Celery worker in a subprocess, for end-to-end tests.

It runs `celery -A config worker` with the test settings, against the test
database pytest-django created (its name is read from the live connection) and
the broker of the test settings (REDIS_URL's Redis, or without it the embedded mode's
filesystem broker in this test process's folder), with CELERY_TASK_ALWAYS_EAGER=false.
Tests using it must use `@pytest.mark.django_db(transaction=True)`
(or the `live_db` fixture): the worker only sees committed rows. The flush that
ends such a test empties every table; plans' post_migrate hook puts the plan
catalog back.

    pytestmark = pytest.mark.django_db(transaction=True)

    def test_it(celery_worker):
        worker = celery_worker(beat=True, env={"WEBHOOK_SWEEP_INTERVAL_SECONDS": "0.5"})
        ...                     # the worker (started without -Q) consumes all queues; with beat=True it
        worker.kill()           # also runs the beat schedule. kill() is SIGKILL to
                                # the whole process group (a machine lost mid-task).

`celery_worker(wrap=["ip", "netns", "exec", "ns"])` runs it inside a network namespace
(tests/support/netns.py).

`celery_beat(env={...})` starts a beat of its own (`celery -A config beat`, the
in-memory scheduler), as production's beats run beside the workers: several per test
are several beats, each `kill()`-able alone.

`celery_worker(queues="celery,sending,imports,intake", name="a")` consumes only those
queues (`-Q`, as the Procfile's worker line) under the hostname `a-<pid>-<n>@<host>`
(`worker.hostname`): several workers of one test tell their logs apart by it.

Every worker started is stopped (SIGTERM, then SIGKILL) when the test ends; the
broker's queues are purged before the first one starts, so no message of an
earlier test is consumed. The test process itself keeps eager Celery; to put a
task on the real broker from it, use `send_task(...)` below.
"""

import os
import signal
import socket
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from tests.support.database import live_database_url

ROOT = Path(__file__).resolve().parents[2]


def queue_names() -> list[str]:
    """The queues the Celery configuration declares (a worker without -Q consumes them all)."""
    from django.conf import settings

    return [queue.name for queue in settings.CELERY_TASK_QUEUES]


def broker_purge() -> None:
    """Empty this test process's queues: its Redis database's (and the unacked set), or
    its filesystem broker's folder."""
    from django.conf import settings

    if settings.CELERY_BROKER_URL == "filesystem://":
        folder = Path(settings.CELERY_BROKER_TRANSPORT_OPTIONS["data_folder_in"])
        for message in folder.iterdir():
            message.unlink(missing_ok=True)
        return
    import redis

    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    client.delete(*queue_names(), "unacked", "unacked_index", "unacked_mutex")
    client.close()


def send_task(name: str, *args) -> None:
    """Put a task on the real broker from the (eager) test process: send_task always
    publishes, which is the point here, so Celery's warning that eager mode does not
    apply to it is expected and silenced."""
    from celery.exceptions import AlwaysEagerIgnored

    from config.celery import app

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AlwaysEagerIgnored)
        app.send_task(name, args=args)


class Worker:
    def __init__(
        self,
        *,
        log_path: Path,
        beat: bool,
        concurrency: int,
        pool: str,
        env: dict,
        queues: str | None = None,
        name: str = "e2e",
        wrap: list[str] | None = None,
    ):
        self.log_path = log_path
        self.hostname = f"{name}-{os.getpid()}-{time.monotonic_ns()}@{socket.gethostname()}"
        command = [
            *(wrap or []),
            str(Path(sys.executable).with_name("celery")),
            "-A",
            "config",
            "worker",
            "--loglevel",
            "INFO",
            # Without -Q, a plain worker consumes every queue the configuration declares.
            *(["-Q", queues] if queues else []),
            "--pool",
            pool,
            "--concurrency",
            str(concurrency),
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "--hostname",
            self.hostname,
        ]
        if beat:
            # The in-memory scheduler: a test's beat needs no schedule file, and on
            # Python 3.13 shelve's SQLite file, opened by the beat process the worker
            # forks, failed now and then with "locking protocol" (beat then stopped).
            command += ["--beat", "--scheduler", "celery.beat:Scheduler"]
        full_env = _process_env(env)
        self._log = open(log_path, "wb")  # noqa: SIM115 (closed in stop())
        self.process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=full_env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: kill() takes the pool too
        )

    @property
    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_ready(self, timeout: float = 60.0) -> "Worker":
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if " ready." in self.log:
                return self
            if self.process.poll() is not None:
                raise RuntimeError(f"celery worker exited early:\n{self.log[-4000:]}")
            time.sleep(0.1)
        raise TimeoutError(f"celery worker not ready after {timeout}s:\n{self.log[-4000:]}")

    def kill(self) -> None:
        """SIGKILL to the worker and its pool children, as if the machine died."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()
        self._log.close()


class Beat(Worker):
    """A `celery -A config beat` process of its own (the in-memory scheduler, see above)."""

    def __init__(self, *, log_path: Path, env: dict):
        self.log_path = log_path
        self._log = open(log_path, "wb")  # noqa: SIM115 (closed in stop())
        self.process = subprocess.Popen(
            [
                str(Path(sys.executable).with_name("celery")),
                "-A",
                "config",
                "beat",
                "--loglevel",
                "INFO",
                "--scheduler",
                "celery.beat:Scheduler",
            ],
            cwd=ROOT,
            env=_process_env(env),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def wait_ready(self, timeout: float = 60.0) -> "Beat":
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if "beat: Starting..." in self.log:
                return self
            if self.process.poll() is not None:
                raise RuntimeError(f"celery beat exited early:\n{self.log[-4000:]}")
            time.sleep(0.1)
        raise TimeoutError(f"celery beat not ready after {timeout}s:\n{self.log[-4000:]}")


def _process_env(env: dict) -> dict:
    """A worker's or beat's environment: the test settings, its database, real Celery;
    a variable `env` gives None is left out."""
    full = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings_test",
        "DATABASE_URL": live_database_url(),
        "CELERY_TASK_ALWAYS_EAGER": "false",
        "PYTHONUNBUFFERED": "1",
        **env,
    }
    return {key: value for key, value in full.items() if value is not None}


@pytest.fixture
def celery_beat(tmp_path):
    """Factory: `celery_beat(env={}, wait=True)` starts a beat process, waits until it
    runs (unless `wait=False`: call its `wait_ready()` later, to start several at once)
    and returns it; every one is stopped when the test ends."""
    beats: list[Beat] = []

    def start(*, env=None, wait: bool = True) -> Beat:
        beat = Beat(
            log_path=tmp_path / f"beat{len(beats)}.log",
            env={k: None if v is None else str(v) for k, v in (env or {}).items()},
        )
        beats.append(beat)
        return beat.wait_ready() if wait else beat

    yield start
    for beat in beats:
        beat.stop()


@pytest.fixture
def celery_worker(tmp_path):
    """Factory: `celery_worker(beat=False, concurrency=8, pool="threads", env={},
    queues=None, name="e2e", wrap=None)` starts a worker, waits until it is ready and
    returns it; `wrap` is a command the worker runs under (`ip netns exec <name>`, which
    execs it: the worker keeps the process's id and group). A variable `env` gives None
    is not passed on (the test process's own, e.g.)."""
    broker_purge()
    workers: list[Worker] = []

    def start(
        *,
        beat: bool = False,
        concurrency: int = 8,
        pool: str = "threads",
        env=None,
        queues: str | None = None,
        name: str = "e2e",
        wrap: list[str] | None = None,
    ):
        worker = Worker(
            log_path=tmp_path / f"worker{len(workers)}.log",
            beat=beat,
            concurrency=concurrency,
            pool=pool,
            env={k: None if v is None else str(v) for k, v in (env or {}).items()},
            queues=queues,
            name=name,
            wrap=wrap,
        )
        workers.append(worker)
        return worker.wait_ready()

    yield start
    for worker in workers:
        worker.stop()
