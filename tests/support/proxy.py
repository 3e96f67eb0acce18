"""A real reverse proxy on loopback, for tests of what the service believes about the
client's address behind one.

    with ReverseProxy(upstream="http://127.0.0.1:8001", source="127.0.0.2") as proxy:
        requests.post(proxy.url + "/signup", ...)

Like nginx's `proxy_add_x_forwarded_for`, it appends the address of the peer it
received the request from to whatever X-Forwarded-For the client sent, and forwards
the request from `source` (a loopback address of its own: the service sees that as
REMOTE_ADDR, distinct from the clients'). Clients pick their own loopback address with
`client_session(address)`, so several "machines" can stand in front of it.

Linux routes the whole 127.0.0.0/8 to loopback; elsewhere (macOS) only 127.0.0.1 is
configured, and `loopback_addresses_usable()` says so, for a skip.
"""

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import requests
from requests.adapters import HTTPAdapter

_HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "content-length",
    # requests hands over the body decoded.
    "content-encoding",
}


def loopback_addresses_usable(*addresses: str) -> bool:
    """Whether this machine lets a socket bind each of these loopback addresses."""
    for address in addresses:
        with socket.socket() as sock:
            try:
                sock.bind((address, 0))
            except OSError:
                return False
    return True


class _SourceAdapter(HTTPAdapter):
    """Connections from one local address (the `source_address` of every socket)."""

    def __init__(self, source: str) -> None:
        self._source = source
        super().__init__()

    def init_poolmanager(self, *args, **kwargs) -> None:
        kwargs["source_address"] = (self._source, 0)
        super().init_poolmanager(*args, **kwargs)


def client_session(address: str) -> requests.Session:
    """A requests session whose connections come from `address` (a loopback address)."""
    session = requests.Session()
    adapter = _SourceAdapter(address)
    session.mount("http://", adapter)
    return session


class ReverseProxy:
    def __init__(self, *, upstream: str, source: str, timeout: float = 30.0) -> None:
        self.upstream = upstream.rstrip("/")
        self.session = client_session(source)
        self.timeout = timeout
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {
                    name: value
                    for name, value in self.headers.items()
                    if name.lower() not in _HOP_BY_HOP and name.lower() != "x-forwarded-for"
                }
                # The client's own header, then the peer this proxy actually saw.
                chain = [*self.headers.get_all("X-Forwarded-For", []), self.client_address[0]]
                headers["X-Forwarded-For"] = ", ".join(chain)
                answer = proxy.session.request(
                    self.command,
                    proxy.upstream + self.path,
                    headers=headers,
                    data=body,
                    allow_redirects=False,
                    timeout=proxy.timeout,
                )
                self.send_response(answer.status_code)
                for name, value in answer.headers.items():
                    if name.lower() not in _HOP_BY_HOP:
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _forward

            def log_message(self, format, *args) -> None:  # noqa: A002 (the base's name)
                pass

        return Handler

    def __enter__(self) -> "ReverseProxy":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
        self.session.close()
        self._thread.join(timeout=10)
