"""A real PgBouncer in transaction mode, in front of the test process's database, for the
end-to-end tests that run the service behind one (docs/scale.md, "Running behind
PgBouncer").

Debian's `pgbouncer` package (`apt-get install pgbouncer`; .ci/run installs it): a
throwaway instance with its own configuration in a temporary folder, listening on a
free loopback port, `pool_mode = transaction`, one database entry naming this test
process's database (test_<name>, which pytest-django created and migrated straight on
PostgreSQL) on the server DATABASE_URL names. Clients log in as anyone without a
password (`auth_type = any`); PgBouncer logs in to PostgreSQL with the test
connection's own user and password. Started as root it drops to the `postgres` user
(or `nobody`), as PgBouncer refuses to run as root.

    def test_it(pgbouncer, celery_worker):
        celery_worker(env=pgbouncer.env)     # DATABASE_URL through it, and the two
                                             # DB_* settings transaction mode needs
        with pgbouncer.routed():             # this test process's own queries too
            ...

`pgbouncer_path()` is the binary; a test needing it is skipped when it is missing, and
fails instead when CI is set (CI must run it). Stopped when the test ends; its log
(`pgbouncer.log`, its stderr) is in the test's tmp_path.
"""

import contextlib
import copy
import os
import pwd
import shutil
import signal
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.ports import free_port, wait_for_port

# What docs/scale.md prescribes for transaction pooling (PgBouncer before 1.21 keeps
# no prepared statements across server connections).
TRANSACTION_MODE_SETTINGS = {"DB_SERVER_SIDE_CURSORS": "false", "DB_PREPARED_STATEMENTS": "false"}


def pgbouncer_path() -> str:
    found = shutil.which("pgbouncer") or (
        "/usr/sbin/pgbouncer" if Path("/usr/sbin/pgbouncer").exists() else None
    )
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("pgbouncer is missing in CI (.ci/run installs Debian's pgbouncer)")
        pytest.skip("pgbouncer not installed (apt-get install pgbouncer); CI runs this")
    return found


def _run_as() -> str | None:
    """The user a root-started PgBouncer switches to (it will not run as root)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            return name
    raise RuntimeError("no 'postgres' or 'nobody' user for PgBouncer to run as")


class PgBouncer:
    def __init__(self, *, directory: Path, binary: str, listen: str = "127.0.0.1"):
        from django.db import connection

        params = connection.settings_dict
        self.database = params["NAME"]
        self.host = listen
        self.port = free_port()
        server = [
            f"host={params.get('HOST') or '127.0.0.1'}",
            f"port={params.get('PORT') or 5432}",
            f"dbname={self.database}",
            f"user={params.get('USER') or 'postgres'}",
        ]
        if params.get("PASSWORD"):
            server.append(f"password={params['PASSWORD']}")
        run_as = _run_as()
        config = f"""\
            [databases]
            {self.database} = {" ".join(server)}

            [pgbouncer]
            listen_addr = {listen}
            listen_port = {self.port}
            unix_socket_dir =
            auth_type = any
            pool_mode = transaction
            default_pool_size = 10
            max_client_conn = 200
            admin_users = postgres
            {f"user = {run_as}" if run_as else ""}
            """
        self.config = directory / "pgbouncer.ini"
        self.config.write_text(textwrap.dedent(config))
        self.log_path = directory / "pgbouncer.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 (closed in stop())
        self.process = subprocess.Popen(
            [binary, str(self.config)], stdout=self._log, stderr=subprocess.STDOUT
        )
        try:
            wait_for_port(self.port, timeout=20, process=self.process)
        except (ChildProcessError, TimeoutError) as exc:
            self.stop()
            raise RuntimeError(f"pgbouncer did not start: {exc}\n{self.log}") from None

    @property
    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    @property
    def url(self) -> str:
        """DATABASE_URL of the test database through PgBouncer."""
        return f"postgres://postgres@{self.host}:{self.port}/{self.database}"

    @property
    def env(self) -> dict[str, str]:
        """A worker's or web process's settings to run through it in transaction mode."""
        return {"DATABASE_URL": self.url, **TRANSACTION_MODE_SETTINGS}

    @contextlib.contextmanager
    def routed(self) -> Iterator[None]:
        """This test process's own connection through PgBouncer meanwhile (the API calls
        a test makes in process are the web's), with the settings `env` gives a worker;
        direct again after."""
        from django.db import connection

        saved = copy.deepcopy(connection.settings_dict)
        connection.close()
        connection.settings_dict.update(HOST=self.host, PORT=str(self.port))
        connection.settings_dict["DISABLE_SERVER_SIDE_CURSORS"] = True
        connection.settings_dict["OPTIONS"]["prepare_threshold"] = None
        try:
            yield
        finally:
            connection.close()
            connection.settings_dict.clear()
            connection.settings_dict.update(saved)

    def show(self, what: str) -> list[tuple]:
        """A row set of PgBouncer's admin console (`SHOW POOLS`, `SHOW STATS`...)."""
        import psycopg

        with psycopg.connect(
            host=self.host, port=self.port, dbname="pgbouncer", user="postgres", autocommit=True
        ) as admin:
            return admin.execute(f"SHOW {what}", prepare=False).fetchall()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)  # a safe shutdown
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self._log.close()


@pytest.fixture
def pgbouncer(tmp_path) -> Iterator[PgBouncer]:
    """A PgBouncer in transaction mode for this test's database (module docstring)."""
    binary = pgbouncer_path()
    from django.db import connection

    if str(connection.settings_dict.get("HOST") or "").startswith("/"):
        # The embedded server (nothing configured) listens on a Unix socket of its own
        # user's; PgBouncer runs as another user (it refuses root) and cannot log in
        # there. CI (DATABASE_URL over TCP) runs this.
        pytest.skip("PgBouncer needs the database over TCP (DATABASE_URL); CI runs this")
    directory = tmp_path / "pgbouncer"
    directory.mkdir()
    bouncer = PgBouncer(directory=directory, binary=binary)
    try:
        yield bouncer
    finally:
        bouncer.stop()
