"""The HTTP exchange under every method: authentication, timeouts, retries, errors.

Retries, each bounded by `max_retries` (default 3), with exponential backoff and jitter:

1. 429: after the `Retry-After` the service sent (refused before anything ran, so any
   request may be sent again), unless it asks for longer than `max_retry_wait`.
2. 5xx, a broken or timed-out connection, and 409 `idempotency_in_progress`: only for
   requests that cannot act twice: GET and DELETE, PATCH and PUT (they set, they do not
   add), and POSTs that carry an Idempotency-Key (the same key on every attempt, so the service
   replays the first outcome instead of acting again).
3. A connection that was never made (refused, connect timeout): any request, since
   nothing reached the service.
"""

import random
import uuid
from collections.abc import Iterator
from time import sleep
from typing import Any
from urllib.parse import parse_qs, urlsplit

import requests
from urllib3.exceptions import NewConnectionError

from outreach_sdk import errors

DEFAULT_BASE_URL = "http://127.0.0.1:8000"
USER_AGENT = "outreach-sdk-python/0.1.0"
# Failures of the connection (not of the request itself, like a malformed URL).
TRANSIENT = (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError)


def _never_connected(exc: requests.RequestException) -> bool:
    """True when no byte of the request can have reached the service."""
    if isinstance(exc, requests.ConnectTimeout):
        return True
    wrapped = exc.args[0] if exc.args else None
    # requests wraps urllib3's MaxRetryError, whose .reason is the NewConnectionError.
    return isinstance(getattr(wrapped, "reason", None), NewConnectionError)


def _next_params(link_header: str | None) -> dict[str, str] | None:
    """The query of the `Link: <...>; rel="next"` header, or None on the last page."""
    for part in (link_header or "").split(","):
        if 'rel="next"' in part and "<" in part:
            url = part[part.index("<") + 1 : part.index(">")]
            return {key: values[-1] for key, values in parse_qs(urlsplit(url).query).items()}
    return None


class Transport:
    def __init__(
        self,
        *,
        api_key: str | None,
        base_url: str,
        timeout: float | tuple[float, float],
        max_retries: int,
        max_retry_wait: float,
        client_name: str | None = None,
    ):
        self.api_key = api_key
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.max_retries = max_retries
        self.max_retry_wait = max_retry_wait
        self.session = requests.Session()
        self.session.headers["User-Agent"] = (
            f"{USER_AGENT} {client_name}" if client_name else USER_AGENT
        )
        self.session.headers["Accept"] = "application/json"
        if api_key:
            self.session.headers["Authorization"] = f"Bearer {api_key}"

    def close(self) -> None:
        self.session.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        json_body: Any = None,
        files: dict[str, Any] | None = None,
        data: dict[str, Any] | None = None,
        idempotent: bool = False,
        idempotency_key: str | None = None,
        stream: bool = False,
    ) -> requests.Response:
        """Send one logical call, retrying as the module says; the final 2xx response.
        `stream`: the body is read as the caller iterates it (close the response)."""
        headers = {}
        if idempotent:
            headers["Idempotency-Key"] = idempotency_key or str(uuid.uuid4())
        repeatable = method in ("GET", "DELETE", "PATCH", "PUT") or idempotent
        url = f"{self.base_url}{path}"
        params = {k: v for k, v in (params or {}).items() if v is not None}
        attempt = 0
        while True:
            try:
                response = self.session.request(
                    method,
                    url,
                    params=params,
                    json=json_body,
                    files=_rewound(files),
                    data=data,
                    headers=headers,
                    timeout=self.timeout,
                    stream=stream,
                )
            except requests.RequestException as exc:
                transient = isinstance(exc, TRANSIENT) and (repeatable or _never_connected(exc))
                if transient and attempt < self.max_retries:
                    attempt += 1
                    sleep(self._backoff(attempt))
                    continue
                raise errors.APIConnectionError(
                    f"{method} {path} failed: {exc}", code="connection_error"
                ) from exc
            if response.status_code < 400:
                return response
            error = _error_from(response)
            response.close()
            wait = self._retry_wait(error, repeatable, attempt)
            if wait is None:
                raise error
            attempt += 1
            sleep(wait)

    def _retry_wait(self, error: errors.OutreachError, repeatable: bool, attempt: int):
        if attempt >= self.max_retries:
            return None
        if isinstance(error, errors.RateLimitError):
            wait = error.retry_after if error.retry_after is not None else self._backoff(attempt)
            return wait if wait <= self.max_retry_wait else None
        if repeatable and (
            isinstance(error, errors.ServerError) or error.code == "idempotency_in_progress"
        ):
            return self._backoff(attempt + 1)
        return None

    def _backoff(self, attempt: int) -> float:
        """0.5 s, 1 s, 2 s, ... with up to 25% jitter, capped at max_retry_wait."""
        base = min(0.5 * 2 ** (attempt - 1), self.max_retry_wait)
        return base * (1 + random.random() / 4)  # noqa: S311 - jitter, not a secret

    def json(self, method: str, path: str, **kwargs) -> Any:
        response = self.request(method, path, **kwargs)
        if response.status_code == 204 or not response.content:
            return None
        return _decode(response)

    def pages(self, path: str, params: dict[str, Any] | None = None) -> Iterator[list[dict]]:
        """Every page of a cursor-paginated list, following `Link: rel="next"`."""
        params = dict(params or {})
        while True:
            response = self.request("GET", path, params=params)
            yield _decode(response)
            following = _next_params(response.headers.get("Link"))
            if following is None:
                return
            params = {**params, **following}


def _rewound(files: dict[str, Any] | None) -> dict[str, Any] | None:
    """Rewind file objects, so a retried upload sends the whole file again."""
    for value in (files or {}).values():
        handle = value[1] if isinstance(value, tuple) else value
        if hasattr(handle, "seek"):
            handle.seek(0)
    return files


def _decode(response: requests.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        raise errors.APIResponseError(
            f"Expected JSON, got {response.headers.get('Content-Type')!r}: {response.text[:200]}",
            status=response.status_code,
        ) from None


def _error_from(response: requests.Response) -> errors.OutreachError:
    status = response.status_code
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict) or "code" not in body:
        cls = errors.ServerError if status >= 500 else errors.APIResponseError
        return cls(
            f"HTTP {status} without the API's error envelope: {response.text[:200]}",
            status=status,
            headers=response.headers,
        )
    cls = errors.error_class(body["code"], status)
    return cls(
        body.get("message") or body["code"],
        code=body["code"],
        status=status,
        details=body.get("details"),
        type=body.get("type"),
        headers=response.headers,
    )


__all__ = ["DEFAULT_BASE_URL", "Transport"]
