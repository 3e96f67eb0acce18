"""The error envelope: the registry of every code the API returns, and the
exception classes views raise. One handler (config.api.handlers) renders them.
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


ERROR_CODES: dict[str, ErrorCode] = {}

# Django-level error responses render like DRF's JSONRenderer: no spaces.
COMPACT = {"separators": (",", ":")}


def _register(code: str, status: int, message: str, description: str) -> ErrorCode:
    ERROR_CODES[code] = ErrorCode(code, status, message, description)
    return ERROR_CODES[code]


# Every code the API can return; GET /docs/errors/<code> documents each.
for _args in [
    (
        "invalid_json",
        400,
        "The request body is not valid JSON.",
        "Send a JSON object with `Content-Type: application/json`.",
    ),
    (
        "bad_request",
        400,
        "The request is malformed.",
        "The request could not be understood: a bad header, host or encoding.",
    ),
    (
        "invalid_signature",
        400,
        "The signature header is missing or does not verify.",
        "Inbound provider notifications must carry a valid signature made with the shared signing secret.",
    ),
    (
        "authentication_required",
        401,
        "An API key is required.",
        "Send `Authorization: Bearer <API_KEY>`. Keys come from `POST /signup` and `POST /api_keys`.",
    ),
    (
        "invalid_api_key",
        401,
        "The API key is not valid.",
        "The key is unknown, malformed or revoked. A lost key cannot be recovered: issue a new one and revoke the old.",
    ),
    (
        "invalid_relay_signature",
        401,
        "The relay provider event could not be verified.",
        "`POST /inbound/relay/<credential_id>` needs the credential's relay provider and signing key, "
        "and a valid, fresh (5 minutes), unused provider signature. Nothing was recorded.",
    ),
    (
        "plan_limit_reached",
        402,
        "The plan's send limit for this period is reached.",
        "New dispatches are refused while the current period's sends are at or above the plan's monthly limit. "
        "Sends already scheduled still go out. `details`: `current_period_sends`, `monthly_limit`.",
    ),
    (
        "permission_denied",
        403,
        "You may not perform this action.",
        "The credentials given do not allow this request.",
    ),
    ("not_found", 404, "No such route.", "The path does not name an endpoint of this API."),
    (
        "api_key_not_found",
        404,
        "No such API key.",
        "The id is unknown, or belongs to another account.",
    ),
    ("plan_not_found", 404, "No such plan.", "No plan has that slug."),
    (
        "webhook_not_found",
        404,
        "No such webhook.",
        "The id is unknown, or belongs to another account.",
    ),
    (
        "campaign_not_found",
        404,
        "No such campaign.",
        "The id is unknown, or belongs to another account.",
    ),
    (
        "contact_not_found",
        404,
        "No such contact.",
        "The id is unknown, or belongs to another account.",
    ),
    (
        "contact_import_not_found",
        404,
        "No such contact import.",
        "The id is unknown, or belongs to another account.",
    ),
    (
        "credential_not_found",
        404,
        "No such SMTP credential.",
        "The id is unknown, or belongs to another account.",
    ),
    (
        "enrollment_not_found",
        404,
        "No such enrollment.",
        "The id is unknown, or belongs to another account.",
    ),
    (
        "method_not_allowed",
        405,
        "Method not allowed.",
        "The endpoint exists but does not accept this HTTP method.",
    ),
    (
        "not_acceptable",
        406,
        "Cannot produce a response in the requested format.",
        "This API answers `application/json`.",
    ),
    (
        "idempotency_conflict",
        409,
        "This Idempotency-Key was used with a different request.",
        "Within 24 hours an Idempotency-Key may only be reused with the same method, path and body.",
    ),
    (
        "idempotency_in_progress",
        409,
        "A request with this Idempotency-Key is still being processed.",
        "Wait for the first request to finish, then retry to receive its response.",
    ),
    (
        "campaign_not_dispatchable",
        409,
        "The campaign cannot be dispatched.",
        "It has no steps, or no enabled SMTP credential. `details` says which.",
    ),
    (
        "enrollment_not_active",
        409,
        "The enrollment has already ended.",
        "Only a pending, scheduled or sent enrollment can be stopped. `details.status` is "
        "the status it ended with.",
    ),
    (
        "already_subscribed",
        409,
        "The account already has a subscription.",
        "A second checkout would start a second subscription. Change or cancel the current one "
        "in the billing portal (`POST /billing/portal`).",
    ),
    (
        "checkout_in_progress",
        409,
        "A checkout of this account is still open.",
        "An account has at most one subscription, so it has at most one open checkout. "
        "Complete the open one (`details.url`) or wait until it expires (`details.expires_at`, "
        "30 minutes after it was started).",
    ),
    (
        "payload_too_large",
        413,
        "The request body is too large.",
        "JSON bodies are limited to 1 MB and CSV uploads to 10 MB unless the operator configured other limits.",
    ),
    (
        "unsupported_media_type",
        415,
        "Unsupported Content-Type.",
        "Send `application/json` (or `multipart/form-data` for CSV uploads).",
    ),
    (
        "cannot_revoke_last_key",
        422,
        "The account's last active API key cannot be revoked.",
        "Create another key first, then revoke this one.",
    ),
    (
        "plan_not_purchasable",
        422,
        "This plan cannot be purchased.",
        "Checkout takes public, paid plans that are not archived. `details.reason` says why "
        "this one is refused: `free`, `unpriced` (a paid plan whose Stripe price is not "
        "configured yet), `private` or `archived`.",
    ),
    (
        "no_psp_customer",
        422,
        "The account has no payment provider customer.",
        "Billing checkout and portal need an account created while the payment provider was configured.",
    ),
    (
        "oauth_not_configured",
        422,
        "The service has no OAuth client for this mailbox provider.",
        "Connecting a Google or Microsoft mailbox with `POST /smtp_credentials/oauth` needs the "
        "operator to set the provider's OAuth client id and secret (`GOOGLE_OAUTH_CLIENT_ID`, "
        "`MICROSOFT_OAUTH_CLIENT_ID`, ...). `details.provider` names the provider.",
    ),
    (
        "validation_failed",
        422,
        "The request is not valid.",
        "`details.fields` maps each invalid field to its messages.",
    ),
    (
        "rate_limited",
        429,
        "Too many requests.",
        "Wait the number of seconds in `Retry-After`. `details`: `limit`, `period` (seconds).",
    ),
    (
        "internal_error",
        500,
        "Internal server error.",
        "Something failed on our side. Nothing about it is shown; the request can be retried.",
    ),
    (
        "psp_unavailable",
        502,
        "The payment provider could not be reached.",
        "Nothing was changed. Retry later.",
    ),
]:
    _register(*_args)


def error_type(code: str) -> str:
    return f"{settings.DOCS_URL}/errors/{code}"


def error_body(code: str, message: str | None = None, details: dict | None = None) -> dict:
    """The envelope of SPEC.md section 2."""
    entry = ERROR_CODES.get(code)
    body: dict[str, Any] = {
        "code": code,
        "type": error_type(code),
        "message": message or (entry.message if entry else code),
    }
    if details is not None:
        body["details"] = details
    return body


class ServiceError(APIException):
    """A domain error: subclasses name their code; status and message come from the registry."""

    code: str = "internal_error"

    def __init__(self, message: str | None = None, *, details: dict | None = None):
        entry = ERROR_CODES[self.code]
        self.status_code = entry.status
        self.message = message or entry.message
        self.details = details
        super().__init__(detail=self.message, code=self.code)


def _error(code: str) -> type[ServiceError]:
    name = "".join(part.title() for part in code.split("_")) + "Error"
    return type(name, (ServiceError,), {"code": code, "__module__": __name__})


InvalidJson = _error("invalid_json")
InvalidSignature = _error("invalid_signature")
NotFoundError = _error("not_found")
ApiKeyNotFound = _error("api_key_not_found")
PlanNotFound = _error("plan_not_found")
WebhookNotFound = _error("webhook_not_found")
CampaignNotFound = _error("campaign_not_found")
ContactNotFound = _error("contact_not_found")
ContactImportNotFound = _error("contact_import_not_found")
CredentialNotFound = _error("credential_not_found")
EnrollmentNotFound = _error("enrollment_not_found")
PlanLimitReached = _error("plan_limit_reached")
InvalidRelaySignature = _error("invalid_relay_signature")
IdempotencyConflict = _error("idempotency_conflict")
IdempotencyInProgress = _error("idempotency_in_progress")
CampaignNotDispatchable = _error("campaign_not_dispatchable")
EnrollmentNotActive = _error("enrollment_not_active")
PayloadTooLarge = _error("payload_too_large")
CannotRevokeLastKey = _error("cannot_revoke_last_key")
PlanNotPurchasable = _error("plan_not_purchasable")
NoPspCustomer = _error("no_psp_customer")
AlreadySubscribed = _error("already_subscribed")
CheckoutInProgress = _error("checkout_in_progress")
PspUnavailable = _error("psp_unavailable")
OAuthNotConfigured = _error("oauth_not_configured")


class ValidationFailed(ServiceError):
    """422 with details.fields; raise it from services for errors a serializer cannot see."""

    code = "validation_failed"

    def __init__(self, fields: dict[str, list[str]], message: str | None = None):
        first = next(iter(fields.items()), None)
        if message is None and first:
            message = f"{first[0]}: {first[1][0]}"
        super().__init__(message, details={"fields": fields})


class RateLimited(ServiceError):
    code = "rate_limited"

    def __init__(self, *, limit: int, period: int, retry_after: int):
        self.retry_after = max(1, int(retry_after))
        super().__init__(details={"limit": limit, "period": period})
