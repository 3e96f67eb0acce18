"""`X-Request-Id` on every response (API, errors, 404s, admin, health, metrics).

A client's own id is kept when it is valid: 1 to 200 characters of `A-Z a-z 0-9 . _ : -`
(enough for a UUID, a ULID or a tracing header's id, nothing a log line or a header could
be broken with); anything else, or none, gets a new UUID. The id is `request.request_id`,
the audit row's `request_id` (accounts.audit), and part of every log line written while
the request runs (config.logs.LineFilter puts it on the record); the web's access line
(config/wsgi.py) reads it from the response header.
"""

import contextvars
import re
import uuid

HEADER = "X-Request-Id"
VALID = re.compile(r"[A-Za-z0-9._:-]{1,200}")
NO_REQUEST = "-"

# The id of the request this thread (or task) serves.
REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default=NO_REQUEST)


def request_id_of(raw: str | None) -> str:
    """The client's id when valid, else a new UUID."""
    if raw is not None and VALID.fullmatch(raw):
        return raw
    return str(uuid.uuid4())


def current_request_id() -> str:
    """The id of the request this thread serves, `-` outside a request."""
    return REQUEST_ID.get()


class RequestIdMiddleware:
    """Outermost: every response carries the header, those of the other middleware too."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        request_id = request_id_of(request.META.get("HTTP_X_REQUEST_ID"))
        request.request_id = request_id
        token = REQUEST_ID.set(request_id)
        try:
            response = self.get_response(request)
        finally:
            REQUEST_ID.reset(token)
        response[HEADER] = request_id
        return response
