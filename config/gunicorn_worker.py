"""The web process's gunicorn worker (config/gunicorn.py): gunicorn's gthread worker, a
pool of threads per process, with only complete request headers reaching the threads.

gunicorn 27's gthread worker hands each new connection to a thread, which waits up to
5 s for the first byte, then reads the request with blocking reads and no timeout: 50
idle connections hold 50 threads for 5 s each (and come back), a client sending its
headers a byte a second holds one for as long as it likes. Here:

- a connection waits for a request in the worker's event loop, as gthread's kept-alive
  connections do between two requests, and is closed after `keepalive` seconds without
  one (WEB_KEEPALIVE_SECONDS);
- the event loop reads the request's headers as they come, and closes the connection
  when they are not all in `client_timeout` seconds after their first byte
  (WEB_CLIENT_TIMEOUT_SECONDS); a thread gets the request when they are (past 64 KB of
  headers, it reads the rest itself);
- on the thread, each read of the request body and each write of the response must be
  done within `client_timeout` seconds (a socket timeout, like nginx's
  client_body_timeout and send_timeout);
- a connection closed after its response waits for the client's own close (up to 2 s,
  as gunicorn's graceful close does) in the event loop, not blocking it.

What stays: a client that sends its body a byte at a time holds a thread until the
body is complete (bodies are up to 1 MB, or 10 MB multipart), and so does one that sends
64 KB of headers at once, then a byte at a time; `threads` of them at once leave the
process nothing else. A proxy that buffers requests before it passes them on (nginx's
default) takes them (README, "Production").

Written against gunicorn 27.0.1 (pinned in pyproject.toml): it overrides the worker's
accept(), on_client_socket_readable(), finish_request() and murder_pending(), and
TConn.init(). tests/foundation/test_web_slow_clients.py is what says it still works.
"""

import contextlib
import errno
import selectors
import socket
import time
from functools import partial

from gunicorn.workers import gthread

# Headers the event loop reads for a request at most; a thread reads any more (under
# the socket timeout).
HEAD_LIMIT = 65536
# How long a connection closed after its response waits for the client's close, and
# how much it reads meanwhile (gunicorn's util.close_graceful, which blocks).
LINGER_SECONDS = 2.0
LINGER_MAX_BYTES = 65536


def _recv(sock, size: int) -> bytes | None:
    """What a non-blocking socket holds: b"" once the client has closed (or reset) it,
    None when nothing has come yet."""
    try:
        return sock.recv(size)
    except (BlockingIOError, InterruptedError):
        return None
    except OSError:
        return b""


def _head_complete(head: bytearray, start: int) -> bool:
    """Whether the headers' blank line is in `head`, looking from `start` on."""
    return head.find(b"\r\n\r\n", start) >= 0 or head.find(b"\n\n", start) >= 0


class Connection(gthread.TConn):
    """A client connection, with what the event loop has read of its next request."""

    def __init__(self, cfg, sock, client, server, read_timeout: float):
        super().__init__(cfg, sock, client, server)
        self.head = bytearray()
        self.read_timeout = read_timeout
        self.lingered = 0

    def init(self) -> None:
        # On the thread, before each request, the socket just made blocking again.
        super().init()
        self.sock.settimeout(self.read_timeout)
        if self.head:
            self.parser.unreader.unread(bytes(self.head))
            self.head = bytearray()


class WebWorker(gthread.ThreadWorker):
    # Set by config/gunicorn.py (WEB_CLIENT_TIMEOUT_SECONDS).
    client_timeout = 10.0

    @classmethod
    def check_config(cls, cfg, log) -> None:
        super().check_config(cfg, log)
        # The event loop reads plain HTTP/1.x: TLS and HTTP/2 end at the proxy.
        if cfg.is_ssl or "h2" in cfg.http_protocols or cfg.protocol != "http":
            raise RuntimeError(f"{cls.__name__} serves plain HTTP/1.x only (no TLS, no h2)")

    def accept(self, listener) -> None:
        try:
            sock, client = listener.accept()
        except OSError as e:
            if e.errno not in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                raise
            return
        self.nr_conns += 1
        conn = Connection(self.cfg, sock, client, listener.getsockname(), self.client_timeout)
        # Waits for its first request as a kept-alive connection waits for its next one.
        conn.timeout = time.monotonic() + max(self.cfg.keepalive, 1)
        self.keepalived_conns.append(conn)
        self.poller.register(
            sock, selectors.EVENT_READ, partial(self.on_client_socket_readable, conn)
        )

    def on_client_socket_readable(self, conn, client) -> None:
        """The first bytes of a request on a waiting connection: read its headers here."""
        self.keepalived_conns.remove(conn)
        conn.timeout = time.monotonic() + self.client_timeout
        self.pending_conns.append(conn)
        self.poller.modify(client, selectors.EVENT_READ, partial(self.on_head_readable, conn))
        self.on_head_readable(conn, client)

    def on_head_readable(self, conn, client) -> None:
        data = _recv(client, HEAD_LIMIT)
        if data is None:
            return
        if not data:
            self._drop(conn)
            return
        start = max(len(conn.head) - 3, 0)
        conn.head += data
        if len(conn.head) < HEAD_LIMIT and not _head_complete(conn.head, start):
            return
        self.poller.unregister(client)
        self.pending_conns.remove(conn)
        conn.data_ready = True  # no waiting for data on the thread
        self.enqueue_req(conn)

    def finish_request(self, conn, fs) -> None:
        if fs.cancelled() or fs.exception() is not None or fs.result() is not False:
            super().finish_request(conn, fs)
            return
        # Closed after its response: gunicorn would wait for the client's close here,
        # blocking the event loop for up to 2 s.
        try:
            conn.sock.shutdown(socket.SHUT_WR)
        except OSError:
            self.nr_conns -= 1
            conn.close()
            return
        conn.sock.setblocking(False)
        conn.timeout = time.monotonic() + LINGER_SECONDS
        self.pending_conns.append(conn)
        self.poller.register(
            conn.sock, selectors.EVENT_READ, partial(self.on_linger_readable, conn)
        )

    def on_linger_readable(self, conn, client) -> None:
        data = _recv(client, LINGER_MAX_BYTES)
        if data is None:
            return
        conn.lingered += len(data)
        if not data or conn.lingered >= LINGER_MAX_BYTES:
            self._drop(conn)

    def murder_pending(self) -> None:
        """Close the pending connections past their time: those reading headers and
        those lingering, whose times are not in order (gunicorn's stops at the first
        one still in time)."""
        now = time.monotonic()
        for conn in [conn for conn in self.pending_conns if conn.timeout <= now]:
            self._drop(conn)

    def _drop(self, conn) -> None:
        """Close a pending connection."""
        self.pending_conns.remove(conn)
        with contextlib.suppress(OSError, KeyError, ValueError):
            self.poller.unregister(conn.sock)
        self.nr_conns -= 1
        conn.close()
