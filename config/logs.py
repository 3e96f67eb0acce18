"""Logs a person can read, from every process (web, worker, beat) alike.

- Idle periodic work is DEBUG: beat's "Sending due task", a worker's "Task ... received",
  and the "succeeded" line of a periodic task that found nothing to do. Work done stays
  INFO: one "succeeded" line per task that did something.
- No secret in any line: the tokens of tracking and unsubscribe paths, API keys past
  their public prefix and webhook secrets are replaced by `[redacted]`.
- LOG_FORMAT=json: one JSON object per line.
- A line written while a request runs names it: `request_id=<id>` at the end of a plain
  line, `"request_id"` in a JSON one (the response's `X-Request-Id`, config.request_id);
  the web's access line (config/wsgi.py) ends with it too.

Celery and the web server use this too: the Celery app leaves logging to Django's LOGGING
(config.celery), the access line is written through it, and granian's own lines get the
same filter and formatter (config/web.py).
"""

import json
import logging
import re
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from config.request_id import NO_REQUEST, REQUEST_ID

REDACTED = "[redacted]"
_REDACTIONS = [
    # Open pixel /t/o/<token>.gif and unsubscribe page /u/<token>: the token is the secret.
    (re.compile(r"/t/o/[^/\s\"'?#]+?\.gif"), f"/t/o/{REDACTED}.gif"),
    (re.compile(r"/t/o/(?!\[redacted\])[^/\s\"'?#]+"), f"/t/o/{REDACTED}"),
    (re.compile(r"/u/[^/\s\"'?#]+"), f"/u/{REDACTED}"),
    # A tracked link /t/c/<token>: the token names the contact and the link.
    (re.compile(r"/t/c/[^/\s\"'?#]+"), f"/t/c/{REDACTED}"),
    # The link of an OAuth mailbox's connect page (single-use, 15 minutes, but a bearer).
    (re.compile(r"/oauth/connect/[^/\s\"'?#]+"), f"/oauth/connect/{REDACTED}"),
    # The signup address proof /signup/verify/<token>: whoever has it proves the address.
    (re.compile(r"/signup/verify/[^/\s\"'?#]+"), f"/signup/verify/{REDACTED}"),
    # API keys: the first 12 characters are the key's public prefix.
    (re.compile(r"\b(ak_live_[A-Za-z0-9_-]{4})[A-Za-z0-9_-]+"), rf"\1{REDACTED}"),
    (re.compile(r"\bwhsec_[A-Za-z0-9_+/=-]+"), f"whsec_{REDACTED}"),
]


def redact(text: str) -> str:
    for pattern, replacement in _REDACTIONS:
        text = pattern.sub(replacement, text)
    return text


# What a periodic task returns when it found nothing to do (Celery logs its repr).
_IDLE_RESULTS = {"0", "None", "[]", "{}", "()"}
_RECEIVED = "Task %(name)s[%(id)s] received"
_SUCCEEDED = "Task %(name)s[%(id)s] succeeded in %(runtime)ss: %(return_value)s"
_BEAT_SENDS = "Scheduler: Sending due task %s (%s)"
_NO_HOSTNAME = "No hostname was supplied."


class LineFilter(logging.Filter):
    """What every line goes through before it is written, in one pass: the lines of idle
    periodic work demoted to DEBUG (dropped unless LOG_LEVEL=DEBUG), a token or a secret
    in the message redacted, and the id of the request it was written in put on the
    record (`%(request_id)s`; `-` outside a request)."""

    def __init__(self, periodic_tasks: Iterable[str] = (), filesystem_broker: bool = False):
        super().__init__()
        self.periodic_tasks = set(periodic_tasks)
        self.filesystem_broker = filesystem_broker

    def _idle(self, record: logging.LogRecord) -> bool:
        if not isinstance(record.msg, str):
            return False
        if record.levelno == logging.WARNING and record.msg.startswith(_NO_HOSTNAME):
            # kombu warns that filesystem:// has no host; it needs none.
            return self.filesystem_broker
        if record.levelno != logging.INFO:
            return False
        if record.msg in (_RECEIVED, _BEAT_SENDS):
            return True
        if record.msg == _SUCCEEDED and isinstance(record.args, dict):
            return (
                record.args.get("name") in self.periodic_tasks
                and str(record.args.get("return_value")) in _IDLE_RESULTS
            )
        return False

    def filter(self, record: logging.LogRecord) -> bool:
        if self._idle(record):
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            if not logging.getLogger(record.name).isEnabledFor(logging.DEBUG):
                return False
        message = record.getMessage()
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        if not hasattr(record, "request_id"):  # the web's access line brings its own
            record.request_id = REQUEST_ID.get()
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, process, message (and exception)."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "process": record.processName
            if record.processName != "MainProcess"
            else record.process,
            "message": record.getMessage(),
        }
        request_id = getattr(record, "request_id", NO_REQUEST)
        if request_id != NO_REQUEST:
            entry["request_id"] = request_id
        if record.exc_info:
            entry["exception"] = redact(self.formatException(record.exc_info))
        return json.dumps(entry, ensure_ascii=False, default=str)


PLAIN_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


class PlainFormatter(logging.Formatter):
    """PLAIN_FORMAT, and ` request_id=<id>` at the end of a line written in a request."""

    def __init__(self) -> None:
        super().__init__(PLAIN_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        request_id = getattr(record, "request_id", NO_REQUEST)
        return line if request_id == NO_REQUEST else f"{line} request_id={request_id}"


def formatter(json_format: bool) -> logging.Formatter:
    return JsonFormatter() if json_format else PlainFormatter()


def logging_config(
    *, level: str, json_format: bool, periodic_tasks: Iterable[str], filesystem_broker: bool
) -> dict[str, Any]:
    """The LOGGING setting."""
    formatter = {"()": JsonFormatter if json_format else PlainFormatter}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {
            "line": {
                "()": LineFilter,
                "periodic_tasks": list(periodic_tasks),
                "filesystem_broker": filesystem_broker,
            },
        },
        "formatters": {"default": formatter},
        "handlers": {
            "console": {
                "class": "logging.StreamHandler",
                "formatter": "default",
                "filters": ["line"],
            }
        },
        "root": {"handlers": ["console"], "level": level},
        "loggers": {
            # 4xx are the access log's one line each; 5xx keep their traceback here.
            "django.request": {"level": "ERROR"},
            "django.server": {"level": "WARNING"},
            # django-axes (admin login lockouts): one WARNING per failed login and per
            # lockout; its INFO lines narrate each of them again.
            "axes": {"level": "WARNING"},
        },
    }
