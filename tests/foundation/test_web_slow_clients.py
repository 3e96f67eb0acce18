"""Idle and slow clients cost the web process connections, not its workers
(granian, config/web.py): the Procfile's web line with 50 idle connections, 5
clients sending a byte a second (headers, or a body) and 2 that never close their end,
each reconnecting whenever the server closes it, and `/health` answers every time,
fast.

On gunicorn's sync workers (a configuration before) every request timed out (5 s);
on its stock gthread worker, with 8 threads as well, and with 64 the p99 was 3.5 s. A
body that stops arriving holds one of granian's threads until its client closes: the
5 here leave threads free; README "Production" puts a buffering proxy in front."""

import re
import socket
import subprocess
import sys
import threading
import time

import pytest
import requests

from tests.accounts.test_rate_limit_server import _stop
from tests.support.embedded import ROOT, embedded_env, embedded_migrate
from tests.support.ports import free_port, wait_for_port

IDLE = 50
SLOW_HEADERS = 3  # a request line and headers that never end
SLOW_BODIES = 2  # POST /signup with a body that never ends
NEVER_CLOSING = 2  # read a `Connection: close` response, keep their end open
PROBING = 12.0  # seconds of /health requests
P99_LIMIT = 0.5

HEADERS = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
BODY = (
    b"POST /signup HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    b'Content-Length: 100000\r\n\r\n{"email": "'
)
CLOSE = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"


def _procfile_web_command() -> str:
    """The Procfile's web line, for a shell (as honcho runs it)."""
    match = re.search(r"^web:\s*(.+)$", (ROOT / "Procfile").read_text(), re.MULTILINE)
    assert match
    return match.group(1)


@pytest.fixture
def web(tmp_path):
    """The Procfile's web process on a free port, in the embedded mode (its PostgreSQL
    started as make run starts it), with its defaults (WEB_CONCURRENCY, WEB_THREADS...)."""
    port = free_port()
    env = embedded_env(tmp_path / "var", f"127.0.0.1:{port}", {"LOG_LEVEL": "warning"})
    embedded_migrate(env)
    log = tmp_path / "web.log"
    process = subprocess.Popen(
        # Under the embedded PostgreSQL, as make run runs the Procfile.
        [sys.executable, "-m", "config.embedded_db", "run", "--"]
        + ["sh", "-c", _procfile_web_command()],  # exec: the shell becomes the server
        cwd=ROOT,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for_port(port, timeout=60, process=process)
        url = f"http://127.0.0.1:{port}"
        assert requests.get(f"{url}/health", timeout=30).status_code == 200
        yield port, url, log
    finally:
        _stop(process)


class Peers:
    """The idle and slow clients, a thread each, reconnecting whenever the server
    closes their connection, until the `with` block ends."""

    def __init__(self, port: int):
        self.port = port
        self.stopping = threading.Event()
        self.connections = 0
        self._lock = threading.Lock()
        targets = [(self._idle, n) for n in range(IDLE)]
        targets += [(self._trickle, HEADERS)] * SLOW_HEADERS + [(self._trickle, BODY)] * SLOW_BODIES
        targets += [(self._never_close, None)] * NEVER_CLOSING
        self.threads = [threading.Thread(target=t, args=(arg,)) for t, arg in targets]

    def _connect(self) -> socket.socket | None:
        while not self.stopping.is_set():
            try:
                sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
            except OSError:
                self.stopping.wait(0.1)
            else:
                with self._lock:
                    self.connections += 1
                return sock
        return None

    def _idle(self, n: int) -> None:
        # Spread over the first second: arriving together, and one by one.
        self.stopping.wait(n / IDLE)
        while (sock := self._connect()) is not None:
            with sock:
                sock.settimeout(0.2)
                while not self.stopping.is_set():
                    try:
                        if sock.recv(1) == b"":
                            break
                    except TimeoutError:
                        continue
                    except OSError:
                        break

    def _trickle(self, opening: bytes) -> None:
        """The opening at once, then one byte a second, never done."""
        while (sock := self._connect()) is not None:
            with sock:
                try:
                    sock.sendall(opening)
                    while not self.stopping.wait(1.0):
                        sock.sendall(b"a")
                except OSError:
                    pass

    def _never_close(self, _) -> None:
        held = []
        while (sock := self._connect()) is not None:
            held.append(sock)
            try:
                sock.sendall(CLOSE)
                sock.recv(65536)
            except OSError:
                pass
            self.stopping.wait(0.5)
        for sock in held:
            sock.close()

    def __enter__(self) -> "Peers":
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(timeout=10)


def _probe(url: str, seconds: float) -> tuple[list[float], list[object]]:
    """GET /health on a new connection every 50 ms: the latencies, and the failures."""
    latencies: list[float] = []
    failures: list[object] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        started = time.monotonic()
        try:
            status = requests.get(f"{url}/health", timeout=5).status_code
        except requests.RequestException as exc:
            failures.append(exc)
        else:
            if status != 200:
                failures.append(status)
        latencies.append(time.monotonic() - started)
        time.sleep(0.05)
    return latencies, failures


def test_idle_and_slow_clients_do_not_hold_up_the_web_process(web):
    port, url, log = web
    with Peers(port) as peers:
        time.sleep(1.5)  # every peer connected, the slow ones a byte or two in
        latencies, failures = _probe(url, PROBING)
    latencies.sort()
    p99 = latencies[int(len(latencies) * 0.99)]
    summary = (
        f"{len(latencies)} requests, p99 {p99 * 1000:.0f} ms, max {latencies[-1] * 1000:.0f} ms"
    )
    print(summary, f"({peers.connections} peer connections)")
    assert failures == [], (summary, failures[:3])
    assert p99 < P99_LIMIT, (summary, log.read_text()[-3000:])
    assert peers.connections >= IDLE + SLOW_HEADERS + SLOW_BODIES + NEVER_CLOSING
