"""Idempotency-Key handling (docs/accounts.md, "Idempotency-Key").

`@idempotent` marks a view handler as accepting the Idempotency-Key header.
For a viewset action put `@action(...)` outermost and `@idempotent` under it.

With the header, on an authenticated request:

1. The key is claimed: a row (account, key) is inserted and committed, status
   in progress. The unique constraint decides between concurrent requests; the
   loser reads the winner's row.
2. An existing row within 24 hours: a different method, path or body is 409
   idempotency_conflict; a row still in progress is 409 idempotency_in_progress;
   a completed row is replayed: its status, headers and body, byte for byte,
   plus `Idempotent-Replay: true`. The handler does not run again.
3. Otherwise the handler runs inside a transaction; its response (a raised
   ServiceError is rendered through the project's exception handler first) is
   stored in the same transaction, so side effects and the stored response
   commit together or not at all. A 5xx response, or an exception nothing
   renders, rolls everything back and releases the claim so the client may
   retry. A `@network_first` handler (config.api.audit) runs outside it, and its
   response is stored after it; one that writes stores it with its write instead
   (`audit_now`), so the change and the answer its key replays commit together.

A claim whose request died (a killed worker) would block its key; after
IDEMPOTENCY_LEASE it is taken over by the next request with the same key.
"""

import contextlib
import functools
import hashlib
import json
import logging
import types
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.http import HttpResponse
from django.http.request import RawPostDataException
from django.utils import timezone

from accounts.errors import IdempotencyConflict, IdempotencyInProgress
from accounts.models import IdempotencyRecord
from accounts.services import IDEMPOTENCY_WINDOW
from config.api.audit import audit_response, audited_call, is_network_first
from config.api.errors import ValidationFailed

logger = logging.getLogger(__name__)

HEADER = "Idempotency-Key"
MAX_KEY_LENGTH = 255
# Longer than any request may run (the web server gives running requests 30 s at a stop, config/web.py).
IDEMPOTENCY_LEASE = timedelta(minutes=5)
# Response headers that belong to each delivery rather than to the stored
# response: DRF adds Allow/Vary again, the views' base adds the rate limit.
_UNSTORED_HEADERS = frozenset(
    {"allow", "vary", "set-cookie", "date", "ratelimit", "ratelimit-policy", "idempotent-replay"}
)


def _canonical_body(request) -> bytes:
    """The request body as a fingerprint sees it.

    JSON is canonicalised (key order and whitespace do not matter); multipart
    uploads by their fields and file contents (the boundary changes on every
    retry); anything else byte for byte.
    """
    content_type = request.content_type or ""
    if content_type.startswith("multipart/"):
        parts: list = sorted([k, v] for k, v in request.data.lists() if k not in request.FILES)
        for name, uploads in sorted(request.FILES.lists()):
            for upload in uploads:
                digest = hashlib.sha256()
                for chunk in upload.chunks():
                    digest.update(chunk)
                upload.seek(0)
                parts.append([name, upload.name, digest.hexdigest()])
        return json.dumps(parts).encode()
    try:
        raw = request.body
    except RawPostDataException:
        # Something read the stream already: DRF has the parsed data.
        raw = json.dumps(request.data, sort_keys=True, default=str).encode()
    try:
        parsed = json.loads(raw) if raw else None
    except ValueError:
        return raw
    return json.dumps(parsed, sort_keys=True, separators=(",", ":")).encode()


def request_fingerprint(request) -> str:
    digest = hashlib.sha256()
    for part in (
        request.method.encode(),
        request.get_full_path().encode(),
        _canonical_body(request),
    ):
        digest.update(hashlib.sha256(part).digest())
    return digest.hexdigest()


class _Release(Exception):
    """Roll the handler's transaction back and answer `response` unstored."""

    def __init__(self, response):
        self.response = response


def _claim(*, account, key: str, fingerprint: str, request) -> IdempotencyRecord:
    """Insert the claim, or return the completed record to replay; raise the 409s."""
    for _ in range(3):
        now = timezone.now()
        try:
            with transaction.atomic():
                return IdempotencyRecord.objects.create(
                    account=account,
                    key=key,
                    fingerprint=fingerprint,
                    method=request.method,
                    path=request.get_full_path()[:2048],
                    locked_at=now,
                    created_at=now,
                )
        except IntegrityError:
            pass
        existing = IdempotencyRecord.objects.filter(account=account, key=key).first()
        if existing is None:
            continue  # Released or pruned meanwhile: claim again.
        if existing.created_at < now - IDEMPOTENCY_WINDOW:
            # Outside the window the key is free again.
            IdempotencyRecord.objects.filter(
                pk=existing.pk, created_at=existing.created_at
            ).delete()
            continue
        if existing.fingerprint != fingerprint:
            raise IdempotencyConflict()
        if existing.status == IdempotencyRecord.Status.COMPLETED:
            return existing
        if existing.locked_at < now - IDEMPOTENCY_LEASE:
            taken = IdempotencyRecord.objects.filter(
                pk=existing.pk,
                status=IdempotencyRecord.Status.IN_PROGRESS,
                locked_at=existing.locked_at,
            ).update(locked_at=now)
            if taken:
                existing.locked_at = now
                return existing
        raise IdempotencyInProgress()
    raise IdempotencyInProgress()


def _replay(record: IdempotencyRecord) -> HttpResponse:
    response = HttpResponse(record.response_body.encode(), status=record.response_status)
    del response["Content-Type"]  # Only the stored one, if any.
    for name, value in record.response_headers.items():
        response[name] = value
    response["Idempotent-Replay"] = "true"
    return response


def _rendered(view, request, response) -> tuple[bytes, dict[str, str]]:
    """The bytes and headers DRF will send for `response`."""
    if hasattr(response, "data"):  # A DRF Response, not rendered yet.
        renderer = request.accepted_renderer
        context = view.get_renderer_context()
        context["response"] = response
        content = renderer.render(response.data, request.accepted_media_type, context)
        if isinstance(content, str):
            content = content.encode(renderer.charset or "utf-8")
        content_type = renderer.media_type
        if renderer.charset:
            content_type = f"{content_type}; charset={renderer.charset}"
        if not content:
            content_type = None
    else:
        content = response.content
        content_type = response.get("Content-Type")
    headers = {
        name: value for name, value in response.items() if name.lower() not in _UNSTORED_HEADERS
    }
    headers.pop("Content-Type", None)
    if content_type:
        headers["Content-Type"] = content_type
    return content, headers


def _store(record: IdempotencyRecord, *, status: int, content: bytes, headers: dict) -> None:
    IdempotencyRecord.objects.filter(pk=record.pk).update(
        status=IdempotencyRecord.Status.COMPLETED,
        response_status=status,
        response_headers=headers,
        response_body=content.decode(),
        completed_at=timezone.now(),
    )


def _store_now(view, request, record: IdempotencyRecord, response) -> None:
    """A network_first handler's answer, stored in the transaction of its write
    (config.api.audit.audit_now): the change and the answer its key replays commit
    together. A 5xx is not stored (the claim is released)."""
    if response.status_code >= 500:
        return
    content, headers = _rendered(view, request, response)
    _store(record, status=response.status_code, content=content, headers=headers)
    request.idempotency_stored = True


def _release(record: IdempotencyRecord) -> None:
    """Frees the key for a retry; an answer stored already (`_store_now`) stays."""
    IdempotencyRecord.objects.filter(
        pk=record.pk, status=IdempotencyRecord.Status.IN_PROGRESS
    ).delete()


def _validated_key(request) -> str | None:
    key = request.headers.get(HEADER)
    if key is None:
        return None
    if not 1 <= len(key) <= MAX_KEY_LENGTH:
        raise ValidationFailed(
            {HEADER: [f"Must be between 1 and {MAX_KEY_LENGTH} characters long."]}
        )
    return key


def _response(view, handler, request, args, kwargs, *, savepoint: bool):
    """The handler's response, or its error rendered (re-raised when nothing renders it).
    In a savepoint: a handler that raises leaves no writes behind, and its rendered
    error can still be stored."""
    try:
        with transaction.atomic() if savepoint else contextlib.nullcontext():
            return handler(view, request, *args, **kwargs)
    except Exception as exc:
        return view.handle_exception(exc)


def idempotent(handler):
    @functools.wraps(handler)
    def wrapper(self, request, *args, **kwargs):
        key = _validated_key(request)
        account = request.user
        if key is None or account is None:
            # A bound method: audited_call reads the handler's network_first through it.
            bound = types.MethodType(handler, self)
            return audited_call(self, bound, request, *args, **kwargs)
        record = _claim(
            account=account, key=key, fingerprint=request_fingerprint(request), request=request
        )
        if record.status == IdempotencyRecord.Status.COMPLETED:
            return _replay(record)
        network = is_network_first(handler)
        try:
            # A network_first handler waits on its peer outside the transaction below;
            # one that writes stores its answer with its write (audit_now).
            response = None
            if network:
                request.idempotency_key = key  # the audit row names it
                request.idempotency_store = functools.partial(_store_now, self, request, record)
                response = _response(self, handler, request, args, kwargs, savepoint=False)
                if getattr(request, "idempotency_stored", False):
                    return response
            with transaction.atomic():
                if response is None:
                    response = _response(self, handler, request, args, kwargs, savepoint=True)
                if response.status_code >= 500:
                    raise _Release(response)
                request.idempotency_key = key  # the audit row names it
                audit_response(self, request, response)  # with its change, never on a replay
                content, headers = _rendered(self, request, response)
                _store(record, status=response.status_code, content=content, headers=headers)
        except _Release as release:
            _release(record)
            return release.response
        except BaseException:
            _release(record)
            raise
        return response

    wrapper.idempotent = True  # type: ignore[attr-defined]
    return wrapper
