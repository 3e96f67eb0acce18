"""The whole service as `make run` starts it, in the embedded mode, for end-to-end tests.

Fixture `embedded_service`: a factory that migrates a fresh VAR_DIR (an embedded
PostgreSQL, filesystem broker, generated keys), collects the static files and starts the
Procfile's processes under `python -m config.procfile` inside `python -m config.embedded_db
run`, with the real settings (config.settings, not the test
settings) and nothing of DATABASE_URL or REDIS_URL. Stopped (Ctrl-C, then SIGKILL to
whatever is left) when the test ends.

    service = embedded_service(env={"SENDING_SCHEDULE_INTERVAL_SECONDS": "1"})
    service.url                    # http://127.0.0.1:<port>
    service.log                    # everything the processes printed so far
    service.interrupt()            # Ctrl-C; returns the seconds everything took to stop
"""

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from config import embedded_db
from tests.support.ports import free_port, wait_for_port

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def procfile_processes() -> list[str]:
    """The names of the Procfile's processes, in order."""
    lines = (ROOT / "Procfile").read_text().splitlines()
    return [line.split(":", 1)[0] for line in lines if re.match(r"\w+:", line)]


def procfile_workers() -> int:
    """How many of them are Celery workers."""
    return sum(" worker" in line for line in (ROOT / "Procfile").read_text().splitlines())


# What the test settings put into this process's environment (os.environ.setdefault):
# eager tasks, test keys, production's signup limit... none of it is make run's.
TEST_SETTINGS_ENV = set(
    re.findall(
        r'os\.environ\.setdefault\("([A-Z0-9_]+)"',
        (ROOT / "config" / "settings_test.py").read_text(),
    )
) | {"TEST_REDIS_URL_GIVEN"}


def embedded_env(var_dir: Path, bind: str, extra: dict | None = None) -> dict:
    """The environment of `make run` on the embedded mode: this one, less the database,
    Redis and broker URLs, the test settings and what they set."""
    names = {"DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE"}
    names |= TEST_SETTINGS_ENV
    env = {k: v for k, v in os.environ.items() if k not in names and not k.startswith("PYTEST")}
    env.update(
        {
            "VAR_DIR": str(var_dir),
            "BIND": bind,
            "BASE_URL": f"http://{bind}",
            "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}",
            "PYTHONUNBUFFERED": "1",
            "STARTUP_BANNER_SHOWN": "1",  # as make run sets it
            **(extra or {}),
        }
    )
    return env


def embedded_migrate(env: dict) -> None:
    """What make run does to VAR_DIR before it starts one of the processes: the database
    migrated (manage.py starts the embedded PostgreSQL for it, and stops it after), and
    the static files' directory (empty here) made."""
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--verbosity", "0"],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=120,
    )
    (Path(env["VAR_DIR"]) / "static").mkdir(parents=True, exist_ok=True)


class EmbeddedService:
    def __init__(self, directory: Path, env: dict | None = None):
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.var_dir = directory / "var"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = embedded_env(self.var_dir, f"127.0.0.1:{self.port}", env)
        self.log_path = directory / "service.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 (closed in stop())
        # As make run does before it starts the processes (the banner into the log).
        for command in (["migrate", "--noinput"], ["collectstatic", "--noinput"], ["banner"]):
            subprocess.run(
                [sys.executable, "manage.py", *command, "--verbosity", "0"],
                cwd=ROOT,
                env=self.env,
                stdout=self._log,
                check=True,
                timeout=300,
            )
            self._log.flush()
        # Under the embedded PostgreSQL, as make run starts them (the steps above each
        # started it for their own length).
        self.process = subprocess.Popen(
            [sys.executable, "-m", "config.embedded_db", "run", "--"]
            + [sys.executable, "-m", "config.procfile", "start"]
            + ["-f", str(ROOT / "Procfile"), "-d", str(ROOT)],
            cwd=ROOT,
            env=self.env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    @property
    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_ready(self, timeout: float = 90.0) -> "EmbeddedService":
        try:
            wait_for_port(self.port, timeout=timeout, process=self.process)
        except (ChildProcessError, TimeoutError) as error:
            # What the processes printed is the only clue to which one stopped and why.
            raise RuntimeError(f"{error}; the service printed:\n{self.log[-6000:]}") from error
        deadline = time.monotonic() + timeout
        while not (
            self.log.count(" ready.") >= procfile_workers() and "beat: Starting" in self.log
        ):
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError(f"the service did not start:\n{self.log[-4000:]}")
            time.sleep(0.2)
        return self

    def interrupt(self, timeout: float = 45.0) -> float:
        """Ctrl-C, as a terminal sends it to `make run` (to its whole process group); the
        seconds until all stopped, the database last."""
        started = time.monotonic()
        os.killpg(self.process.pid, signal.SIGINT)
        self.process.wait(timeout=timeout)
        return time.monotonic() - started

    def stop(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.interrupt()
        # Whatever is left of the processes honcho started (each in a session of its own).
        for line in self.log.splitlines():
            match = re.search(r"\| \S+ started \(pid=(\d+)\)", line)
            if match:
                with contextlib.suppress(OSError):
                    os.killpg(int(match.group(1)), signal.SIGKILL)
        # And its database, if the wrapper did not live to stop it.
        embedded_db.server_stop(embedded_db.data_dir(self.var_dir))
        self._log.close()


@pytest.fixture
def embedded_service(tmp_path):
    services: list[EmbeddedService] = []

    def start(env: dict | None = None) -> EmbeddedService:
        service = EmbeddedService(tmp_path / f"service{len(services)}", env)
        services.append(service)
        return service.wait_ready()

    yield start
    for service in services:
        service.stop()
