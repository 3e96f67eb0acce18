"""A host of its own on this machine: a Linux network namespace joined to this one by a
veth pair, for the tests of a sending host cut off from the network mid-send.

    def test_it(network_host, smtp_sink, celery_worker):  # skipped unless root with a
        host = network_host                                # working `ip netns`
        sink = smtp_sink(host=host.gateway)  # a peer the namespace reaches over the veth
        worker = celery_worker(wrap=host.exec_prefix, env=host.service_env(), ...)
        host.cut()         # `ip link set <veth> down`: its processes live on, reaching
                           # nothing, as nothing reaches them
        host.restore()     # the link up again; their TCP goes on

Inside, the namespace has its own loopback and one address (`host.address`) on a /30
with this machine's end (`host.gateway`). PostgreSQL and Redis listen on loopback only,
so `service_env()` gives a process inside DATABASE_URL and REDIS_URL through TCP
forwarders bound on `host.gateway` (threads of this test process, one pair of pumps a
connection): cut the link and the forwarders' connections to the namespace hang as a
real partition's do, while PostgreSQL and Redis see idle clients. Needs the test
database and Redis over TCP (DATABASE_URL and REDIS_URL, as CI sets them).

Everything is removed when the test ends: the namespace (with it the veth pair) and the
forwarders.
"""

import contextlib
import os
import random
import shutil
import socket
import subprocess
import threading
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import pytest


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=10)


def _pump(source: socket.socket, target: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            target.sendall(data)
    with contextlib.suppress(OSError):
        target.shutdown(socket.SHUT_WR)


class Forwarder:
    """Accepts on (address, a free port) and forwards each connection to `upstream`."""

    def __init__(self, address: str, upstream: tuple[str, int]):
        self.upstream = upstream
        self._listener = socket.create_server((address, 0))
        self.port = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        with contextlib.suppress(OSError):  # the listener closed: the end
            while True:
                client, _ = self._listener.accept()
                try:
                    server = socket.create_connection(self.upstream, timeout=10)
                except OSError:
                    client.close()
                    continue
                server.settimeout(None)
                self._sockets += [client, server]
                for pair in ((client, server), (server, client)):
                    threading.Thread(target=_pump, args=pair, daemon=True).start()

    def close(self) -> None:
        self._listener.close()
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


def _moved(url: str, host: str, port: int) -> str:
    """`url` with its host and port replaced (its user, path and query kept)."""
    parts = urlsplit(url)
    auth = parts.netloc.rpartition("@")[0]
    return urlunsplit(parts._replace(netloc=f"{auth}@{host}:{port}" if auth else f"{host}:{port}"))


class NetworkHost:
    def __init__(self) -> None:
        tag = uuid.uuid4().hex[:8]
        self.name = f"outreach-test-{tag}"
        self.link = f"veo{tag}"  # this machine's end (interface names: 15 characters)
        inside = f"vei{tag}"
        # A /30 of 10.213.0.0/16, drawn: test processes running at once get their own.
        base = random.randrange(0, 65536, 4)  # noqa: S311 (not a secret)
        prefix = f"10.213.{base // 256}"
        self.gateway, self.address = f"{prefix}.{base % 256 + 1}", f"{prefix}.{base % 256 + 2}"
        self._forwarders: list[Forwarder] = []
        _ip("netns", "add", self.name)
        try:
            _ip("link", "add", self.link, "type", "veth", "peer", "name", inside)
            _ip("link", "set", inside, "netns", self.name)
            _ip("addr", "add", f"{self.gateway}/30", "dev", self.link)
            _ip("link", "set", self.link, "up")
            for args in (
                ("addr", "add", f"{self.address}/30", "dev", inside),
                ("link", "set", inside, "up"),
                ("link", "set", "lo", "up"),
            ):
                _ip("netns", "exec", self.name, "ip", *args)
        except BaseException:
            self.close()
            raise

    @property
    def exec_prefix(self) -> list[str]:
        """A command's prefix to run it inside the namespace."""
        return ["ip", "netns", "exec", self.name]

    def forward(self, host: str, port: int) -> int:
        """A port on `gateway` forwarding to host:port of this machine."""
        forwarder = Forwarder(self.gateway, (host, port))
        self._forwarders.append(forwarder)
        return forwarder.port

    def service_env(self) -> dict[str, str]:
        """DATABASE_URL and REDIS_URL (and the URL the test settings derive a test
        process's Redis database from) for a process inside, through forwarders."""
        from django.conf import settings

        from tests.support.database import live_database_url

        env = {}
        database = urlsplit(live_database_url())
        env["DATABASE_URL"] = _moved(
            live_database_url(), self.gateway, self.forward(database.hostname, database.port)
        )
        redis = urlsplit(settings.REDIS_URL)
        port = self.forward(redis.hostname, redis.port or 6379)
        env["REDIS_URL"] = _moved(settings.REDIS_URL, self.gateway, port)
        if "TEST_REDIS_URL_GIVEN" in os.environ:  # config/settings_test.py
            env["TEST_REDIS_URL_GIVEN"] = _moved(
                os.environ["TEST_REDIS_URL_GIVEN"], self.gateway, port
            )
        return env

    def cut(self) -> None:
        _ip("link", "set", self.link, "down")

    def restore(self) -> None:
        _ip("link", "set", self.link, "up")

    def close(self) -> None:
        for forwarder in self._forwarders:
            forwarder.close()
        # The namespace's end of the pair goes with it, and this machine's end with that.
        subprocess.run(["ip", "netns", "delete", self.name], capture_output=True, check=False)
        subprocess.run(["ip", "link", "delete", self.link], capture_output=True, check=False)


def network_host_unavailable() -> str | None:
    """Why this machine cannot make a network host for a test, or None."""
    from django.conf import settings

    from tests.support.database import live_database_url

    if os.geteuid() != 0:
        return "a network namespace needs root (CI runs as root)"
    if shutil.which("ip") is None:
        return "no `ip` command (iproute2)"
    if live_database_url().partition("?host=")[2] or not settings.REDIS_URL:
        return "the cut must reach the database and the broker: needs DATABASE_URL and REDIS_URL over TCP"
    probe = f"outreach-probe-{uuid.uuid4().hex[:8]}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"`ip netns add` fails here: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "delete", probe], capture_output=True, check=False)
    return None


@pytest.fixture
def network_host() -> Iterator[NetworkHost]:
    """A network namespace host (module docstring); the test is skipped, saying why,
    when this machine cannot make one."""
    reason = network_host_unavailable()
    if reason:
        pytest.skip(f"needs `ip netns` as root: {reason}")
    host = NetworkHost()
    try:
        yield host
    finally:
        host.close()
