"""The web process's WSGI application (the Procfile's `web:` line serves it with
granian): Django's, with two things a server does not do the service's way.

- The request's environ without the process environment: granian's WSGI worker starts
  every request's environ from a copy of os.environ (DATABASE_URL, SECRET_KEY... would
  be in request.META, and in any error report that shows it). The variables as they
  were at the start are dropped from it, but for the CGI names a server sets from the
  request (a header whose HTTP_ name and value are a process variable's goes too).
- The access line: one per request on the `web.access` logger, through the service's
  logging (format, LOG_FORMAT=json, redaction of tokens), ending with the response's
  X-Request-Id; the time is the application's, to its response's first byte.
"""

import logging
import os
import time
from collections.abc import Callable, Iterable
from typing import Any

from django.core.wsgi import get_wsgi_application

from config.startup import settings_load_or_exit

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
settings_load_or_exit("web", status=4)
django_application = get_wsgi_application()

REQUEST_KEYS = frozenset(
    {
        "REQUEST_METHOD", "SCRIPT_NAME", "PATH_INFO", "QUERY_STRING", "CONTENT_TYPE",
        "CONTENT_LENGTH", "SERVER_NAME", "SERVER_PORT", "SERVER_PROTOCOL", "REMOTE_ADDR",
        "REMOTE_PORT", "REQUEST_URI", "RAW_URI", "GATEWAY_INTERFACE", "SERVER_SOFTWARE",
    }
)  # fmt: skip
PROCESS_ENVIRONMENT = tuple(
    (key, value) for key, value in os.environ.items() if key not in REQUEST_KEYS
)
access_log = logging.getLogger("web.access")


def _request_line(environ: dict[str, Any]) -> str:
    query = environ.get("QUERY_STRING")
    path = environ.get("PATH_INFO", "") + (f"?{query}" if query else "")
    return f"{environ.get('REQUEST_METHOD')} {path} {environ.get('SERVER_PROTOCOL')}"


def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    """Django's application on the request's own environ, and its access line."""
    for key, value in PROCESS_ENVIRONMENT:
        if environ.get(key) == value:
            del environ[key]
    started = time.perf_counter()
    answered: dict[str, Any] = {}

    def start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        answered["status"], answered["headers"] = status, headers
        return start_response(status, headers, exc_info)

    body = django_application(environ, start)
    if access_log.isEnabledFor(logging.INFO):
        headers = {name.lower(): value for name, value in answered.get("headers", ())}
        access_log.info(
            '%s "%s" %s %s "%s" "%s" %dms',
            environ.get("REMOTE_ADDR", "-"),
            _request_line(environ),
            answered.get("status", "500").split(" ", 1)[0],
            headers.get("content-length", "-"),
            environ.get("HTTP_REFERER", "-"),
            environ.get("HTTP_USER_AGENT", "-"),
            (time.perf_counter() - started) * 1000,
            extra={"request_id": headers.get("x-request-id", "-")},
        )
    return body
