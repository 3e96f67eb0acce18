"""One delivery attempt: the envelope, its signature, the HTTP POST, and the
retry schedule between attempts. The drains (webhooks.delivery) call these."""

import json
import logging
import time
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.utils import timezone
from urllib3 import Timeout
from urllib3.exceptions import (
    ConnectTimeoutError,
    HTTPError,
    NameResolutionError,
    NewConnectionError,
    ProtocolError,
    ReadTimeoutError,
    SSLError,
)

from config.outbound_deadline import request_deadline
from config.retry import schedule_delay
from config.timestamps import utc_timestamp
from webhooks.models import DeliveryJob, Event
from webhooks.secrets import signature_header, standard_signature_header
from webhooks.transport import UnsafeAddress, delivery_pool

logger = logging.getLogger(__name__)

RESPONSE_READ_CAP = 64 * 1024  # bytes of a response body read at most
RESPONSE_EXCERPT_CHARS = 1024  # of which this much is kept for the admin
USER_AGENT = "service-webhooks/1.0"


def retry_delay(attempts_done: int) -> int:
    """Seconds before attempt `attempts_done + 1`.

    WEBHOOK_RETRY_SCHEDULE gives them outright (its last value repeats if it is
    short); otherwise the polynomial 60 * n**3: 1, 8, 27 and 64 minutes.
    """
    return schedule_delay(
        settings.WEBHOOK_RETRY_SCHEDULE,
        attempts_done,
        fallback=lambda attempts: 60 * attempts**3,
        minimum=0,
    )


def envelope_bytes(*, job: DeliveryJob, event: Event) -> bytes:
    envelope = {
        "id": str(job.id),
        "type": event.type,
        "created_at": utc_timestamp(event.created_at),
        "account_id": str(event.account_id),
        "data": event.data,
    }
    return json.dumps(envelope, separators=(",", ":"), ensure_ascii=False).encode()


@dataclass(frozen=True)
class AttemptResult:
    started_at: datetime
    ended_at: datetime
    status_code: int | None = None
    error: str | None = None
    retryable: bool = False
    excerpt: str = ""
    duration_ms: int = 0

    @property
    def ok(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300

    def row_fields(self) -> dict:
        """The WebhookDelivery columns this attempt fills."""
        return {
            "status_code": self.status_code,
            "error": self.error,
            "response_excerpt": self.excerpt,
            "duration_ms": self.duration_ms,
            "delivered_at": self.ended_at if self.ok else None,
            "created_at": self.started_at,
        }


def _is_retryable_status(code: int) -> bool:
    return code >= 500 or code in (408, 429)


def _connection_error_text(exc: Exception) -> str:
    if isinstance(exc, NameResolutionError):
        return "connection failed: the host name does not resolve"
    text = str(exc)
    marker = "Failed to establish a new connection: "
    if marker in text:
        text = text.split(marker, 1)[1]
    return f"connection failed: {text}"[:500]


def signed_headers(*, secret: str, message_id: str, body: bytes, timestamp: int) -> dict:
    """The headers of one delivery: SPEC.md's `X-Service-Signature` and the Standard
    Webhooks trio, both over the same timestamp (webhooks.secrets)."""
    return {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "Accept-Encoding": "identity",
        "X-Service-Signature": signature_header(secret=secret, body=body, timestamp=timestamp),
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": standard_signature_header(
            secret=secret, message_id=message_id, body=body, timestamp=timestamp
        ),
    }


def http_post_signed(*, url: str, body: bytes, secret: str, message_id: str) -> AttemptResult:
    """One POST of a signed body (every delivery, test and replay is made here);
    `message_id` is the envelope id. Never raises for anything the network does.
    WEBHOOK_TIMEOUT_SECONDS is its total deadline (config.outbound_deadline): a receiver
    answering a byte at a time is cut off as one that never answers."""
    timeout = settings.WEBHOOK_TIMEOUT_SECONDS
    headers = signed_headers(
        secret=secret, message_id=message_id, body=body, timestamp=int(time.time())
    )
    started = time.monotonic()
    started_at = timezone.now()

    def elapsed() -> int:
        return int((time.monotonic() - started) * 1000)

    def result(**fields) -> AttemptResult:
        return AttemptResult(started_at=started_at, ended_at=timezone.now(), **fields)

    timed_out = f"timed out after {timeout:g}s"
    response = None
    try:
        with request_deadline(timeout) as deadline:
            try:
                # No retry, no redirect followed (a 3xx is an answer); the body read here.
                response = delivery_pool().urlopen(
                    "POST",
                    url,
                    body=body,
                    headers=headers,
                    timeout=Timeout(connect=timeout, read=timeout),
                    retries=False,
                    redirect=False,
                    preload_content=False,
                    decode_content=False,
                )
                raw = response.read(RESPONSE_READ_CAP)
            except Exception:
                if deadline.expired:  # cut off: whatever the socket's end looked like
                    return result(error=timed_out, retryable=True, duration_ms=elapsed())
                if response is None:
                    raise
                raw = b""  # a body cut short does not change what the status said
            if deadline.expired:
                return result(error=timed_out, retryable=True, duration_ms=elapsed())
    except UnsafeAddress as e:
        return result(error=f"refused: {e}", duration_ms=elapsed())
    except NewConnectionError as e:  # refused, unreachable, not resolved (a timeout's kin)
        return result(error=_connection_error_text(e), retryable=True, duration_ms=elapsed())
    except (ConnectTimeoutError, ReadTimeoutError):
        return result(error=timed_out, retryable=True, duration_ms=elapsed())
    except (ProtocolError, SSLError, OSError) as e:  # reset, closed, TLS
        return result(error=_connection_error_text(e), retryable=True, duration_ms=elapsed())
    except (HTTPError, ValueError) as e:
        return result(error=f"request failed: {type(e).__name__}", duration_ms=elapsed())
    finally:  # read to its end, the connection went back to the pool; else it is closed
        if response is not None:
            response.close()
            response.release_conn()

    return result(duration_ms=elapsed(), **_answer_fields(response.status, raw))


def _answer_fields(code: int, raw: bytes) -> dict:
    """What an answer (its status and the start of its body) makes of the attempt."""
    # PostgreSQL text holds no NUL: shown as U+FFFD, as an undecodable byte is.
    excerpt = (
        raw[:RESPONSE_EXCERPT_CHARS].decode("utf-8", errors="replace").replace("\x00", "\ufffd")
    )
    if 200 <= code < 300:
        return {"status_code": code, "excerpt": excerpt}
    retryable = _is_retryable_status(code)
    if 300 <= code < 400:
        error = f"HTTP {code}: redirects are not followed"
    else:
        error = f"HTTP {code}" + ("" if retryable else ": not retried")
    return {"status_code": code, "error": error, "retryable": retryable, "excerpt": excerpt}
