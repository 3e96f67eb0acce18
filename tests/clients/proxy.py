"""A TCP proxy in front of the live server that fails chosen requests on purpose, with
real HTTP on both sides, for the SDK's retry tests.

    proxy = FaultyProxy(upstream_url).start()
    proxy.fail("POST", "/campaigns", "drop")   # the next such request: forwarded, and the
                                               # client's socket closed before any answer
    proxy.fail("GET", "/api_keys", "429")      # the next such request: 429 + Retry-After: 1,
                                               # not forwarded
    proxy.requests                             # [(method, path, headers)] of every request

One request per connection: the proxy asks the live server to close each connection
after its response (`Connection: close`; it reads the response to the end of the
connection), and closes the client's.
"""

import json
import socket
import threading
from urllib.parse import urlsplit

from requests.structures import CaseInsensitiveDict

RATE_LIMITED_BODY = json.dumps(
    {
        "code": "rate_limited",
        "type": "http://testserver/docs/errors/rate_limited",
        "message": "Too many requests.",
        "details": {"limit": 60, "period": 60},
    }
).encode()


def _read_request(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


def _closing(raw: bytes) -> bytes:
    """The request, with `Connection: close` for any Connection header it had."""
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = [line for line in head.split(b"\r\n") if not line.lower().startswith(b"connection:")]
    return b"\r\n".join([*lines, b"Connection: close"]) + b"\r\n\r\n" + body


class FaultyProxy:
    def __init__(self, upstream_url: str):
        parts = urlsplit(upstream_url)
        self.upstream = (parts.hostname, parts.port)
        self.requests: list[tuple[str, str, CaseInsensitiveDict]] = []
        self._faults: list[tuple[str, str, str]] = []
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._stopped = False

    def start(self) -> "FaultyProxy":
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def stop(self) -> None:
        self._stopped = True
        self._listener.close()

    def fail(self, method: str, path: str, fault: str) -> None:
        with self._lock:
            self._faults.append((method, path, fault))

    def _take_fault(self, method: str, path: str) -> str | None:
        with self._lock:
            for index, (want_method, want_path, fault) in enumerate(self._faults):
                if want_method == method and path.split("?")[0] == want_path:
                    del self._faults[index]
                    return fault
        return None

    def _accept(self) -> None:
        while not self._stopped:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            raw = _read_request(conn)
            if not raw:
                return
            head = raw.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
            method, path, _ = head[0].split(" ", 2)
            headers = CaseInsensitiveDict(line.split(": ", 1) for line in head[1:] if ": " in line)
            with self._lock:
                self.requests.append((method, path, headers))
            fault = self._take_fault(method, path)
            if fault == "429":
                conn.sendall(
                    b"HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\n"
                    b"Retry-After: 1\r\nConnection: close\r\n"
                    + f"Content-Length: {len(RATE_LIMITED_BODY)}\r\n\r\n".encode()
                    + RATE_LIMITED_BODY
                )
                return
            response = self._forward(raw)
            if fault == "drop":
                return  # the server acted; the client hears nothing but a closed socket
            conn.sendall(response)

    def _forward(self, raw: bytes) -> bytes:
        with socket.create_connection(self.upstream, timeout=30) as upstream:
            upstream.sendall(_closing(raw))
            chunks = []
            while chunk := upstream.recv(65536):
                chunks.append(chunk)
            return b"".join(chunks)
