import random
import socket
import subprocess
import time

# Below Linux's ephemeral range (32768-60999 by default), from which the kernel picks
# the local port of every outgoing connection (to PostgreSQL, Redis, HTTP peers): a
# port taken from there and released could be handed to such a connection before the
# server meant to listen on it binds it.
_PORTS = range(20000, 32000)


def free_port() -> int:
    """A port nothing listens on now, for a server about to be started."""
    for _ in range(100):
        port = random.choice(_PORTS)  # noqa: S311 - not a secret
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port found")


def wait_for_port(
    port: int, *, timeout: float = 15.0, process: subprocess.Popen | None = None
) -> None:
    """Wait until something listens on `port`; when `process` is given, fail at once if
    it exits first (a server that could not start)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        if process is not None and process.poll() is not None:
            raise ChildProcessError(f"the server for port {port} exited with {process.returncode}")
        time.sleep(0.05)
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port} after {timeout}s")
