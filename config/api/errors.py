"""The error envelope: the registry of every code the API returns, the base of the
exception classes views raise, and the generic codes. One handler
(config.api.handlers) renders them.

Each code is one ServiceError subclass naming its `code`, HTTP `status`, default
`message` and the `description` of its page (GET /docs/errors/<code>); defining the
class registers it in ERROR_CODES, which the docs pages and the OpenAPI read. An
app's own codes live in its `errors` module (accounts.errors, billing.errors,
webhooks.errors, outreach.errors), imported by its AppConfig.ready so that every code is registered
at startup. The generic codes, those of no one app, are here.
"""

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from rest_framework.exceptions import APIException


@dataclass(frozen=True)
class ErrorCode:
    code: str
    status: int
    message: str
    description: str


# Every code the API can return, filled by ServiceError's subclasses as they are defined.
ERROR_CODES: dict[str, ErrorCode] = {}

# Django-level error responses render like DRF's JSONRenderer: no spaces.
COMPACT = {"separators": (",", ":")}


def error_type(code: str) -> str:
    return f"{settings.DOCS_URL}/errors/{code}"


def error_body(code: str, message: str | None = None, details: dict | None = None) -> dict:
    """The error envelope (docs/api.md, "Errors")."""
    entry = ERROR_CODES.get(code)
    body: dict[str, Any] = {
        "code": code,
        "type": error_type(code),
        "message": message or (entry.message if entry else code),
    }
    if details is not None:
        body["details"] = details
    return body


def refusal_json(exc: "ServiceError") -> dict:
    """A refusal a preview reports (the dispatch's, a response's): the HTTP status the
    previewed request would answer, and its envelope."""
    return {"status": exc.status, **error_body(exc.code, exc.message, exc.details)}


class ServiceError(APIException):
    """A domain error. A subclass that names its `code` must name its `status`,
    `message` and `description` too, and is registered in ERROR_CODES."""

    code: str = "internal_error"
    status: int = 500
    message: str = "Internal server error."
    description: str = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "code" not in cls.__dict__:
            return
        missing = [
            name for name in ("status", "message", "description") if name not in cls.__dict__
        ]
        if missing:
            raise TypeError(f"{cls.__qualname__} names its code but not its {', '.join(missing)}")
        entry = ErrorCode(cls.code, cls.status, cls.message, cls.description)
        known = ERROR_CODES.get(cls.code)
        if known is not None and known != entry:
            raise TypeError(f"error code {cls.code!r} is already registered differently")
        ERROR_CODES[cls.code] = entry
        cls.status_code = cls.status

    def __init__(self, message: str | None = None, *, details: dict | None = None):
        self.message = message or type(self).message
        self.details = details
        super().__init__(detail=self.message, code=self.code)


# --- Generic codes ----------------------------------------------------------------


class InvalidJson(ServiceError):
    code = "invalid_json"
    status = 400
    message = "The request body is not valid JSON."
    description = "Send a JSON object with `Content-Type: application/json`."


class BadRequest(ServiceError):
    code = "bad_request"
    status = 400
    message = "The request is malformed."
    description = (
        "The request could not be understood: a bad header, host or encoding, or a body "
        "that stopped arriving."
    )


class AuthenticationRequired(ServiceError):
    code = "authentication_required"
    status = 401
    message = "An API key is required: send the header Authorization: Bearer <API_KEY>."
    description = "Send `Authorization: Bearer <API_KEY>`. Keys come from `POST /signup` and `POST /api_keys`."


class InvalidApiKey(ServiceError):
    code = "invalid_api_key"
    status = 401
    message = "The API key is not valid."
    description = "The key is unknown, malformed or revoked. A lost key cannot be recovered: issue a new one and revoke the old."


class PermissionDenied(ServiceError):
    code = "permission_denied"
    status = 403
    message = "You may not perform this action."
    description = "The credentials given do not allow this request."


class InsufficientRole(ServiceError):
    code = "insufficient_role"
    status = 403
    message = "This API key's role may not perform this operation."
    description = (
        "Each API key has a role: `reader` < `drafter` < `sender` < `admin`, each allowed what "
        'the ones before it are (docs/accounts.md, "Roles", lists every operation and the '
        "role it needs). The role is checked before the id, so the answer is the same for any "
        "id. `details`: `role` (the key's), `required` (the least role the operation needs). "
        "Use a key with that role, or have an admin create one (`POST /api_keys` with `role`)."
    )


class NotFoundError(ServiceError):
    code = "not_found"
    status = 404
    message = "No such route."
    description = "The path does not name an endpoint of this API."


class MethodNotAllowed(ServiceError):
    code = "method_not_allowed"
    status = 405
    message = "Method not allowed."
    description = "The endpoint exists but does not accept this HTTP method."


class NotAcceptable(ServiceError):
    code = "not_acceptable"
    status = 406
    message = "Cannot produce a response in the requested format."
    description = "This API answers `application/json`."


class PayloadTooLarge(ServiceError):
    code = "payload_too_large"
    status = 413
    message = "The request body is too large."
    description = "JSON bodies are limited to 1 MB and CSV uploads to 10 MB, and a message posted to a simulator mailbox (`POST /smtp_credentials/:id/inbound`) to IMAP_MAX_MESSAGE_BYTES (1 MB), unless the operator configured other limits. `details.limit_bytes` is the limit."


class UnsupportedMediaType(ServiceError):
    code = "unsupported_media_type"
    status = 415
    message = "Unsupported Content-Type: send the header Content-Type: application/json."
    description = (
        "Send `Content-Type: application/json` with a JSON body (or "
        "`Content-Type: multipart/form-data` for a CSV upload to `POST /contact_imports`). "
        "The message names the types the endpoint takes."
    )


class InternalError(ServiceError):
    code = "internal_error"
    status = 500
    message = "Internal server error."
    description = (
        "Something failed on our side. Nothing about it is shown; the request can be retried."
    )


class ValidationFailed(ServiceError):
    """422 with details.fields; raise it from services for errors a serializer cannot see."""

    code = "validation_failed"
    status = 422
    message = "The request is not valid."
    description = "`details.fields` maps each invalid field to its messages."

    def __init__(self, fields: dict[str, list[str]], message: str | None = None):
        first = next(iter(fields.items()), None)
        if message is None and first:
            message = f"{first[0]}: {first[1][0]}"
        super().__init__(message, details={"fields": fields})


class RateLimited(ServiceError):
    """429 with Retry-After; `headers` are the rate limit's own (RateLimit-Policy and
    RateLimit), sent with the error."""

    code = "rate_limited"
    status = 429
    message = "Too many requests."
    description = (
        "Wait the number of seconds in `Retry-After`. `details`: `limit`, `period` (seconds)."
    )

    def __init__(
        self, *, limit: int, period: int, retry_after: int, headers: dict[str, str] | None = None
    ):
        self.retry_after = max(1, int(retry_after))
        self.headers = dict(headers or {})
        super().__init__(details={"limit": limit, "period": period})
