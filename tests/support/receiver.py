"""A real HTTP receiver on 127.0.0.1, for tests that make the service call out.

Fixture `receiver`: a server on a free port, in a thread, for one test.

    receiver.url                      # "http://127.0.0.1:<port>/hook"
    receiver.script(503, 503, 200)    # answers to the next requests, in order;
                                      # then `receiver.default` (200) for the rest
    receiver.script(Reply(200, hold=True))  # keep the request hanging until
                                      # receiver.release() (or the test ends)
    receiver.script(Reply(200, trickle=0.02))  # the whole answer (status line,
                                      # headers, body) one byte every 20 ms
    receiver.wait_for(3)              # block until 3 requests arrived, return them
    receiver.requests                 # [Received(method, path, headers, body, peer)]

Headers are a case-insensitive dict; `body` is the raw bytes as sent; `peer` the
client's (host, port), the same for the requests of one kept-alive connection.

A slow or dead peer, as real receivers are (also settable on a running receiver):

    receiver.delay = 0.2              # every answer 200 ms late (on top of a Reply's delay)
    receiver.hang = True              # read each request, record it, never answer
                                      # until the receiver stops
    Receiver(delay=0.2).start()       # the same as constructor options (hang=True too)

Each connection is served by its own (daemon) thread and the listen backlog is 1024,
so hundreds of concurrent connections are fine.

Run as a script (`python -m tests.support.receiver --port N`) it answers 200 to
everything as fast as it can (the benchmark's peer); `--delay S` and `--hang` as
above; `--port` may be repeated (one server per port, same options); `--log FILE`
appends a line per request: `<unix time received> <unix time answered, or - when
hanging> <port> <path> <the JSON body's "id", or ->`.
"""

import argparse
import contextlib
import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from requests.structures import CaseInsensitiveDict


@dataclass(frozen=True)
class Reply:
    status: int = 200
    body: bytes = b"ok"
    headers: dict = field(default_factory=dict)
    delay: float = 0.0  # seconds before answering
    hold: bool = False  # do not answer until release()
    trickle: float = 0.0  # seconds between the answer's bytes, sent one at a time


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    headers: CaseInsensitiveDict
    body: bytes
    peer: tuple[str, int] = ("", 0)  # the client's address: one per connection


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a hanging request never holds up the process's exit
    request_queue_size = 1024  # hundreds of clients connecting at once (kernel-capped)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()

    def process_request(self, request, client_address):
        with self._connections_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request):
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def connections_close(self) -> None:
        """End the connections clients keep open (keep-alive), as a server that goes
        away does: a client's next request there must not reach this receiver."""
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)


class _Log:
    """One line per request, shared by the servers of one script process."""

    def __init__(self, path):
        self._file = open(path, "a", buffering=1)  # noqa: SIM115 (lives with the process)
        self._lock = threading.Lock()

    def write(self, *, received: float, answered: float | None, port: int, path: str, body):
        try:
            event_id = json.loads(body).get("id") or "-"
        except (ValueError, AttributeError):
            event_id = "-"
        answered_text = "-" if answered is None else f"{answered:.6f}"
        with self._lock:
            self._file.write(f"{received:.6f} {answered_text} {port} {path} {event_id}\n")


class Receiver:
    def __init__(
        self,
        *,
        port: int = 0,
        record: bool = True,
        delay: float = 0.0,
        hang: bool = False,
        log: _Log | None = None,
        poll_interval: float = 0.05,
    ):
        self.default = Reply(200)
        self.delay = delay  # seconds before every answer
        self.hang = hang  # never answer (until stop)
        self.requests: list[Received] = []
        self._script: list[Reply] = []
        self._record = record
        self._log = log
        self._lock = threading.Condition()
        self._released = threading.Event()
        self._stopped = threading.Event()
        self._server = _Server(("127.0.0.1", port), self._handler_class())
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/hook"
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": poll_interval},
            daemon=True,
        )

    def start(self) -> "Receiver":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._released.set()
        self._stopped.set()
        self._server.shutdown()
        self._server.server_close()
        self._server.connections_close()

    def script(self, *replies: "Reply | int") -> None:
        with self._lock:
            self._script.extend(r if isinstance(r, Reply) else Reply(r) for r in replies)

    def release(self) -> None:
        self._released.set()

    def wait_for(self, count: int, *, timeout: float = 15.0) -> list[Received]:
        deadline = time.monotonic() + timeout
        with self._lock:
            while len(self.requests) < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(
                        f"receiver got {len(self.requests)} requests, expected {count}"
                    )
                self._lock.wait(remaining)
            return list(self.requests)

    def _next_reply(self, received: Received | None) -> Reply:
        with self._lock:
            if received is not None:
                self.requests.append(received)
            reply = self._script.pop(0) if self._script else self.default
            self._lock.notify_all()
            return reply

    def _handler_class(self):
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real receivers do
            # Headers and body go out in two writes: without this, Nagle plus the
            # client's delayed ACK stall every response by ~40 ms.
            disable_nagle_algorithm = True

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                received_at = time.time()
                received = None
                if receiver._record:
                    received = Received(
                        method=self.command,
                        path=self.path,
                        headers=CaseInsensitiveDict(self.headers.items()),
                        body=body,
                        peer=self.client_address[:2],
                    )
                reply = receiver._next_reply(received)
                log = receiver._log
                if receiver.hang:
                    if log is not None:
                        log.write(
                            received=received_at,
                            answered=None,
                            port=receiver.port,
                            path=self.path,
                            body=body,
                        )
                    receiver._stopped.wait()
                    self.close_connection = True
                    return  # not a byte of an answer
                if reply.hold:
                    receiver._released.wait(timeout=60)
                if reply.delay or receiver.delay:
                    time.sleep(reply.delay + receiver.delay)
                if reply.trickle:
                    self._trickle(reply)
                    return
                try:
                    self.send_response(reply.status)
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(reply.body)))
                    self.end_headers()
                    self.wfile.write(reply.body)
                except OSError:
                    pass  # the client went away (a killed worker)
                if log is not None:
                    log.write(
                        received=received_at,
                        answered=time.time(),
                        port=receiver.port,
                        path=self.path,
                        body=body,
                    )

            def _trickle(self, reply: Reply) -> None:
                head = (
                    f"HTTP/1.1 {reply.status} Trickled\r\nContent-Length: {len(reply.body)}\r\n\r\n"
                ).encode()
                self.close_connection = True
                for byte in head + reply.body:
                    if receiver._stopped.wait(reply.trickle):
                        return
                    try:
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                    except OSError:
                        return  # the client gave up

            do_GET = do_PUT = do_PATCH = do_DELETE = do_POST

            def log_message(self, format, *args):
                pass

        return Handler


@pytest.fixture
def receiver():
    server = Receiver().start()
    try:
        yield server
    finally:
        server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Answer 200 to every request.")
    parser.add_argument("--port", type=int, action="append", required=True, help="repeatable")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument("--hang", action="store_true", help="read requests, never answer")
    parser.add_argument("--log", help="append a line per request")
    args = parser.parse_args()
    shared_log = _Log(args.log) if args.log else None
    for port in args.port:
        Receiver(
            port=port,
            record=False,
            delay=args.delay,
            hang=args.hang,
            log=shared_log,
            poll_interval=0.5,  # only checks for shutdown; the process just exits
        ).start()
    threading.Event().wait()
