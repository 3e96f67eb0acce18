"""A total deadline for an HTTP request made through config.outbound's guarded pools:
connect, headers and body together. Per-socket timeouts cannot give one (a peer that
sends a byte every few seconds resets them for ever), so one thread per process shuts
down the socket of each request whose deadline passed, which ends whatever read was
blocked on it at once.

    with request_deadline(10.0) as deadline:
        response = pool.urlopen(..., preload_content=False)
        body = response.read()
    if deadline.expired: ...  # cut off

The guarded connections play their part (config.outbound): a connection that starts a
request becomes that request's (`deadline_watch.connection_taken`), and a connect is
bounded by the time left.
"""

import contextlib
import heapq
import itertools
import os
import socket
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from urllib3.connection import HTTPConnection


class RequestDeadline:
    """The moment one HTTP request must be over by: connect, headers and body together.
    `expired` says whether the watch cut it off (its socket shut down, so whatever read
    was blocked on it returned or raised at once)."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.at = time.monotonic() + seconds
        self.expired = False
        self.over = False  # the request ended (or gave up) before the deadline
        self.connection: HTTPConnection | None = None  # the connection it is using
        self.connecting: socket.socket | None = None  # a socket not yet the connection's

    def bound(self, timeout: float | None) -> float:
        """A per-operation timeout cut to the time left (a tiny one once it is past)."""
        left = max(self.at - time.monotonic(), 0.001)
        return left if timeout is None else min(timeout, left)

    def socket_connected(self, sock: socket.socket) -> None:
        with deadline_watch.lock:
            self.connecting = sock
        if self.expired:  # passed while it connected: the watch found no socket
            _shut(sock)


def _shut(sock: socket.socket | None) -> None:
    """Shut a socket down under whoever is reading it (the socket module's own call,
    so a TLS socket's state is left to its reader)."""
    if sock is not None:
        with contextlib.suppress(OSError):
            socket.socket.shutdown(sock, socket.SHUT_RDWR)


class _DeadlineLocal(threading.local):
    current: RequestDeadline | None = None


_deadline_local = _DeadlineLocal()


def deadline_current() -> RequestDeadline | None:
    """The deadline of the request this thread is making, if it has one."""
    return _deadline_local.current


class _DeadlineWatch:
    """One thread per process (started on first use, again in a forked child) that
    cuts off the requests whose deadline passed: it shuts the socket of the connection
    the request is using. A connection is the deadline's only while that request has
    it: taken from the pool by another request (`connection_taken`, under the same
    lock), it is never cut off for the first one's sake."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._wake = threading.Condition(self.lock)
        self._heap: list[tuple[float, int, RequestDeadline]] = []
        self._order = itertools.count()
        self._pid: int | None = None

    def add(self, deadline: RequestDeadline) -> None:
        with self.lock:
            if self._pid != os.getpid():
                self._pid = os.getpid()
                self._heap.clear()
                threading.Thread(target=self._run, name="http-deadlines", daemon=True).start()
            heapq.heappush(self._heap, (deadline.at, next(self._order), deadline))
            # The watch sleeps until the earliest deadline: woken only when this one is
            # it (deadlines mostly come in order, so most requests wake nothing).
            if self._heap[0][2] is deadline:
                self._wake.notify()

    def end(self, deadline: RequestDeadline) -> None:
        with self.lock:
            deadline.over = True
            deadline.connection = deadline.connecting = None

    def connection_taken(self, conn, deadline: RequestDeadline | None) -> None:
        """`conn` now carries `deadline`'s request (None: a request without one). A
        socket the watch shut down is not used again: urllib3 drops a connection that
        reads as closed before it hands it out."""
        with self.lock:
            conn.request_deadline = deadline
            if deadline is not None:
                deadline.connection = conn

    def _run(self) -> None:
        while True:
            with self.lock:
                now = time.monotonic()
                while self._heap and (self._heap[0][2].over or self._heap[0][0] <= now):
                    _, _, deadline = heapq.heappop(self._heap)
                    if not deadline.over:
                        self._cut_off(deadline)
                wait = self._heap[0][0] - now if self._heap else None
                self._wake.wait(wait)

    @staticmethod
    def _cut_off(deadline: RequestDeadline) -> None:
        deadline.expired = True
        conn = deadline.connection
        if conn is None:
            # Not sending yet: a new connection's TLS handshake runs on the socket its
            # connect made for this request (the connect itself is bounded).
            _shut(deadline.connecting)
            return
        if getattr(conn, "request_deadline", None) is not deadline:
            return  # another request's by now
        _shut(conn.sock if conn.sock is not None else deadline.connecting)


deadline_watch = _DeadlineWatch()


@contextlib.contextmanager
def request_deadline(seconds: float) -> Iterator[RequestDeadline]:
    """A total deadline for the requests this thread makes through guarded_pool_manager's
    pools inside the block: `seconds` after entering it the request's socket is shut
    down, whatever it is waiting for. Read the response's body inside the block too; then
    `deadline.expired` tells a cut-off answer from a complete one."""
    deadline = RequestDeadline(seconds)
    _deadline_local.current = deadline
    deadline_watch.add(deadline)
    try:
        yield deadline
    finally:
        _deadline_local.current = None
        deadline_watch.end(deadline)
