"""One exception handler for DRF, and the Django-level error views, all
rendering the envelope of config.api.errors."""

import logging
from collections.abc import Callable, Iterable
from functools import wraps

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.http import Http404, JsonResponse, UnreadablePostError
from django.urls import Resolver404, resolve
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import set_rollback

from config.api.errors import (
    COMPACT,
    ERROR_CODES,
    BadRequest,
    PayloadTooLarge,
    RateLimited,
    ServiceError,
    error_body,
)

logger = logging.getLogger(__name__)

# DRF's built-in exceptions, by the code this API gives them.
_DRF_CODES: list[tuple[type[exceptions.APIException], str]] = [
    (exceptions.ParseError, "invalid_json"),
    (exceptions.NotAuthenticated, "authentication_required"),
    (exceptions.AuthenticationFailed, "invalid_api_key"),
    (exceptions.PermissionDenied, "permission_denied"),
    (exceptions.NotFound, "not_found"),
    (exceptions.MethodNotAllowed, "method_not_allowed"),
    (exceptions.NotAcceptable, "not_acceptable"),
    (exceptions.UnsupportedMediaType, "unsupported_media_type"),
    (exceptions.Throttled, "rate_limited"),
]


def flatten_errors(detail, prefix: str = "") -> dict[str, list[str]]:
    """DRF's nested error detail as {"a.b.0.c": ["message", ...]}."""
    fields: dict[str, list[str]] = {}
    if isinstance(detail, dict):
        for key, value in detail.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            fields.update(flatten_errors(value, path))
    elif isinstance(detail, list):
        if all(not isinstance(item, dict | list) for item in detail):
            fields[prefix or "non_field_errors"] = [str(item) for item in detail]
        else:
            for index, item in enumerate(detail):
                if item:
                    fields.update(
                        flatten_errors(item, f"{prefix}.{index}" if prefix else str(index))
                    )
    else:
        fields[prefix or "non_field_errors"] = [str(detail)]
    return fields


def unsupported_media_type_message(context) -> str:
    """What the client sent and the header to send instead, from the view's parsers:
    DRF's 'Unsupported media type "" in request.' says neither."""
    request, view = context.get("request"), context.get("view")
    accepted: list[str] = []
    for parser in view.get_parsers() if view is not None else []:
        if parser.media_type not in accepted:
            accepted.append(parser.media_type)
    send = " or ".join(accepted or ["application/json"])
    sent = getattr(request, "content_type", "") or ""
    if not sent:
        return f"The request has a body but no Content-Type: send the header Content-Type: {send}."
    if len(sent) > 100:
        sent = sent[:100] + "..."
    return f"Unsupported Content-Type {sent}: send the header Content-Type: {send}."


def exception_handler(exc, context):
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()
    elif isinstance(exc, RequestDataTooBig):
        exc = PayloadTooLarge()
    elif isinstance(exc, UnreadablePostError):
        # The body ended before its Content-Length (the client went away).
        exc = BadRequest()

    if not isinstance(exc, exceptions.APIException):
        return None  # Django's handler500 renders internal_error.

    headers = {}
    auth_header = getattr(exc, "auth_header", None)
    if auth_header:
        headers["WWW-Authenticate"] = auth_header

    if isinstance(exc, RateLimited):
        headers.update(exc.headers)
        headers["Retry-After"] = str(exc.retry_after)
        body = error_body(exc.code, exc.message, exc.details)
    elif isinstance(exc, ServiceError):
        body = error_body(exc.code, exc.message, exc.details)
    elif isinstance(exc, exceptions.ValidationError):
        fields = flatten_errors(exc.detail)
        first_field, first_messages = next(iter(fields.items()))
        message: str | None = (
            first_messages[0]
            if first_field == "non_field_errors"
            else f"{first_field}: {first_messages[0]}"
        )
        body = error_body("validation_failed", message, {"fields": fields})
        exc.status_code = 422
    else:
        code = next((c for cls, c in _DRF_CODES if isinstance(exc, cls)), None)
        if code is None:
            code = exc.default_code if exc.default_code in ERROR_CODES else "internal_error"
        message = str(exc.detail) if isinstance(exc.detail, str) else None
        if isinstance(exc, exceptions.NotAuthenticated):
            message = None  # the registry's, which says what to send (DRF's does not)
        elif isinstance(exc, exceptions.UnsupportedMediaType):
            message = unsupported_media_type_message(context)
        # djangorestframework-stubs leave out Throttled.wait.
        wait = getattr(exc, "wait", None) if isinstance(exc, exceptions.Throttled) else None
        if wait is not None:
            headers["Retry-After"] = str(max(1, int(wait)))
        body = error_body(code, message)
        if code in ("authentication_required", "invalid_api_key"):
            # Missing credentials are 401 with the scheme named, never 403.
            exc.status_code = 401
            headers.setdefault("WWW-Authenticate", "Bearer")

    set_rollback()
    return Response(body, status=exc.status_code, headers=headers)


def _json_error(
    code: str, status: int, *, message: str | None = None, details: dict | None = None
) -> JsonResponse:
    return JsonResponse(
        error_body(code, message, details), status=status, json_dumps_params=COMPACT
    )


def bad_request(request, exception=None):
    return _json_error("bad_request", 400)


def permission_denied(request, exception=None):
    return _json_error("permission_denied", 403)


def not_found(request, exception=None):
    """404 for an unknown route. When the path is a route without its trailing slash
    (the API's paths take none), the message says so and names the right path."""
    path = request.path_info
    if len(path) > 1 and path.endswith("/"):
        bare = path.rstrip("/")
        try:
            resolve(bare)
        except Resolver404:
            pass
        else:
            return _json_error(
                "not_found",
                404,
                message=f"No such route: the API's paths take no trailing slash. Try {bare}",
                details={"path": bare},
            )
    return _json_error("not_found", 404)


def method_not_allowed(request, allowed: Iterable[str]) -> JsonResponse:
    """405 for a plain Django view (DRF's views raise MethodNotAllowed into
    exception_handler), with the methods it takes in `Allow`."""
    response = _json_error("method_not_allowed", 405)
    response["Allow"] = ", ".join(allowed)
    return response


def methods_allowed(*methods: str) -> Callable:
    """Decorates a plain Django view (a page, the pixel, a redirect) that takes only
    `methods`: any other is the envelope's 405 method_not_allowed (method_not_allowed)."""

    def decorator(view: Callable) -> Callable:
        @wraps(view)
        def guarded(request, *args, **kwargs):
            if request.method not in methods:
                return method_not_allowed(request, methods)
            return view(request, *args, **kwargs)

        return guarded

    return decorator


def server_error(request):
    return _json_error("internal_error", 500)
