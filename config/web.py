"""The web process (the Procfile's `web:` line): granian, a stock HTTP server with WSGI
workers, serving config.wsgi:application. Idle connections and slow clients wait in its
Rust event loop, not on a Python thread (tests/foundation/test_web_slow_clients.py).

    python -m config.web

Reads BIND (host:port), WEB_CONCURRENCY (processes), WEB_THREADS (Python threads of
each: the requests it runs at once), WEB_CLIENT_TIMEOUT_SECONDS (request headers not
all in by then: connection closed), LOG_LEVEL and LOG_FORMAT (granian's own lines in
the service's format; the access line is config.wsgi's). What it does not bound: a
request body that stops arriving holds its thread until the client closes (README,
"Production": a buffering proxy in front).
"""

import os

from granian.constants import HTTPModes, Interfaces
from granian.http import HTTP1Settings
from granian.log import LogLevels
from granian.server import Server

from config.logs import JsonFormatter, LineFilter, PlainFormatter

HEAD_LIMIT = 36 * 1024


def log_config() -> dict:
    """granian's own log lines (start, stop, worker errors) in the service's format."""
    json_format = os.environ.get("LOG_FORMAT", "plain").lower() == "json"
    formatter = {"()": JsonFormatter if json_format else PlainFormatter}
    handler = {"class": "logging.StreamHandler", "formatter": "service", "filters": ["line"]}
    return {
        "filters": {"line": {"()": LineFilter}},
        "formatters": {"service": formatter},
        "handlers": {"service": handler},
        "loggers": {"_granian": {"handlers": ["service"], "propagate": False}},
    }


def server():  # granian's Server is MPServer or MTServer, chosen when it is imported
    host, _, port = os.environ.get("BIND", "127.0.0.1:8000").rpartition(":")
    client_timeout = float(os.environ.get("WEB_CLIENT_TIMEOUT_SECONDS", "10"))
    return Server(
        "config.wsgi:application",
        address=host or "127.0.0.1",
        port=int(port),
        interface=Interfaces.WSGI,
        http=HTTPModes.http1,  # TLS and HTTP/2 end at the proxy
        websockets=False,
        workers=int(os.environ.get("WEB_CONCURRENCY", "2")),
        blocking_threads=int(os.environ.get("WEB_THREADS", "8")),
        http1_settings=HTTP1Settings(
            header_read_timeout=int(client_timeout * 1000),
            # A request's line and headers: up to 36 KB in all (an over-long
            # Authorization up to 32 KB reaches the service, which answers 401); past it
            # granian answers 431 itself (checked after each read: a head up to about
            # 45 KB may pass; docs/api.md "Limits of the server").
            max_buffer_size=HEAD_LIMIT,
        ),
        log_level=LogLevels(os.environ.get("LOG_LEVEL", "info").lower()),
        log_dictconfig=log_config(),
        # On SIGTERM: requests running get this long to finish (gunicorn's 30 s).
        workers_kill_timeout=30,
    )


if __name__ == "__main__":
    server().serve()
