"""One exception class per envelope `code`.

Every API error carries the envelope `{code, type, message, details}`; the SDK raises
the class registered for its code (`CampaignNotFound`, `RateLimited`, ...). Each class
also derives from the class of its HTTP status family (`NotFoundError`,
`ConflictError`, ...), so callers can catch as broadly or as narrowly as they like. A
code this SDK does not know yet raises the status family's class.
"""

from collections.abc import Mapping
from typing import Any


class OutreachError(Exception):
    """Base class of every error the SDK raises."""

    code: str | None = None

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        status: int | None = None,
        details: dict[str, Any] | None = None,
        type: str | None = None,
        headers: Mapping[str, str] | None = None,
    ):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.status = status
        self.details = details or {}
        self.type = type
        self.headers = headers or {}
        # The service's id of the request (X-Request-Id): quote it to support; it is also
        # the `request_id` of the audit log and of the service's log lines.
        self.request_id: str | None = self.headers.get("X-Request-Id")

    def __str__(self) -> str:
        prefix = f"{self.status} {self.code}: " if self.status else ""
        return f"{prefix}{self.message}"


class APIConnectionError(OutreachError):
    """The service could not be reached, or the connection broke, after every retry."""


class APIResponseError(OutreachError):
    """The service answered something that is not the API's JSON (a proxy's error page)."""


# Status families: the base class of every code of that status.
class BadRequestError(OutreachError):  # 400
    pass


class AuthenticationError(OutreachError):  # 401
    pass


class PaymentRequiredError(OutreachError):  # 402
    pass


class PermissionDeniedError(OutreachError):  # 403
    pass


class NotFoundError(OutreachError):  # 404
    pass


class MethodNotAllowedError(OutreachError):  # 405
    pass


class NotAcceptableError(OutreachError):  # 406
    pass


class ConflictError(OutreachError):  # 409
    pass


class PayloadTooLargeError(OutreachError):  # 413
    pass


class UnsupportedMediaTypeError(OutreachError):  # 415
    pass


class UnprocessableError(OutreachError):  # 422
    pass


class RateLimitError(OutreachError):  # 429
    @property
    def retry_after(self) -> int | None:
        value = self.headers.get("Retry-After")
        return int(value) if value and value.isdigit() else None


class ServerError(OutreachError):  # 5xx
    pass


STATUS_FAMILIES: dict[int, type[OutreachError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    402: PaymentRequiredError,
    403: PermissionDeniedError,
    404: NotFoundError,
    405: MethodNotAllowedError,
    406: NotAcceptableError,
    409: ConflictError,
    413: PayloadTooLargeError,
    415: UnsupportedMediaTypeError,
    422: UnprocessableError,
    429: RateLimitError,
}

# One class per code of the API's error registry.


class InvalidJson(BadRequestError):
    code = "invalid_json"


class BadRequest(BadRequestError):
    code = "bad_request"


class InvalidSignature(BadRequestError):
    code = "invalid_signature"


class AuthenticationRequired(AuthenticationError):
    code = "authentication_required"


class InvalidApiKey(AuthenticationError):
    code = "invalid_api_key"


class InvalidRelaySignature(AuthenticationError):
    code = "invalid_relay_signature"


class PlanLimitReached(PaymentRequiredError):
    code = "plan_limit_reached"


class PermissionDenied(PermissionDeniedError):
    code = "permission_denied"


class EmailUnverified(PermissionDeniedError):
    """Dispatch and outreach before the account proved its signup address: open the
    emailed link; `client.email_verification.send()` asks for a new one."""

    code = "email_unverified"


class RouteNotFound(NotFoundError):
    code = "not_found"


class ApiKeyNotFound(NotFoundError):
    code = "api_key_not_found"


class PlanNotFound(NotFoundError):
    code = "plan_not_found"


class WebhookNotFound(NotFoundError):
    code = "webhook_not_found"


class WebhookDeliveryNotFound(NotFoundError):
    code = "webhook_delivery_not_found"


class CampaignNotFound(NotFoundError):
    code = "campaign_not_found"


class ContactNotFound(NotFoundError):
    code = "contact_not_found"


class ContactImportNotFound(NotFoundError):
    code = "contact_import_not_found"


class CredentialNotFound(NotFoundError):
    code = "credential_not_found"


class EnrollmentNotFound(NotFoundError):
    code = "enrollment_not_found"


class ReplyNotFound(NotFoundError):
    code = "reply_not_found"


class BlocklistEntryNotFound(NotFoundError):
    code = "blocklist_entry_not_found"


class ApprovalNotFound(NotFoundError):
    code = "approval_not_found"


class InsufficientRole(PermissionDeniedError):
    """The key's role may not do this; `details`: `role`, `required`."""

    code = "insufficient_role"


class KeySendLimitReached(PermissionDeniedError):
    """The key's daily send limit; `details`: `limit`, `used`, `resets_at`."""

    code = "key_send_limit_reached"


class ApprovalNotPending(ConflictError):
    """Decided already, or expired: nothing was sent. `details.status`: its status."""

    code = "approval_not_pending"


class MethodNotAllowed(MethodNotAllowedError):
    code = "method_not_allowed"


class NotAcceptable(NotAcceptableError):
    code = "not_acceptable"


class IdempotencyConflict(ConflictError):
    code = "idempotency_conflict"


class WebhookDisabled(ConflictError):
    code = "webhook_disabled"


class DeliveryNotRedeliverable(ConflictError):
    code = "delivery_not_redeliverable"


class IdempotencyInProgress(ConflictError):
    code = "idempotency_in_progress"


class CampaignNotDispatchable(ConflictError):
    code = "campaign_not_dispatchable"


class EnrollmentNotActive(ConflictError):
    code = "enrollment_not_active"


class CredentialUnavailable(ConflictError):
    """A response to a reply: the mailbox that received it was deleted, is disabled, or
    needs re-authorization (`details.reason`). Nothing was sent."""

    code = "credential_unavailable"


class ContactSuppressed(ConflictError):
    """A response to a reply: the contact, or the address the reply came from,
    unsubscribed or bounced (`details.reason`). Nothing was sent."""

    code = "contact_suppressed"


class CredentialNotSimulated(ConflictError):
    """Mailboxes.inbound on a real mailbox: only simulator mailboxes take posted mail."""

    code = "credential_not_simulated"


class CampaignNotSimulated(ConflictError):
    """Campaigns.advance on a campaign with a real mailbox: the test clock moves only
    campaigns whose mailboxes are all simulators."""

    code = "campaign_not_simulated"


class AlreadySubscribed(ConflictError):
    code = "already_subscribed"


class CheckoutInProgress(ConflictError):
    code = "checkout_in_progress"


class PayloadTooLarge(PayloadTooLargeError):
    code = "payload_too_large"


class UnsupportedMediaType(UnsupportedMediaTypeError):
    code = "unsupported_media_type"


class CannotRevokeLastKey(UnprocessableError):
    code = "cannot_revoke_last_key"


class ApiKeyLimitReached(UnprocessableError):
    code = "api_key_limit_reached"


class PlanNotPurchasable(UnprocessableError):
    code = "plan_not_purchasable"


class NoPspCustomer(UnprocessableError):
    code = "no_psp_customer"


class OauthNotConfigured(UnprocessableError):
    code = "oauth_not_configured"


class ContactBlocked(UnprocessableError):
    """`POST /outreaches` for an address the account's blocklist names, or a response to
    a reply whose address (or its contact's) the blocklist names (`details.entry`).
    Nothing was sent or written."""

    code = "contact_blocked"


class ValidationFailed(UnprocessableError):
    code = "validation_failed"


class RateLimited(RateLimitError):
    code = "rate_limited"


class InternalError(ServerError):
    code = "internal_error"


class PspUnavailable(ServerError):
    code = "psp_unavailable"


def _leaves(cls: type[OutreachError]):
    for sub in cls.__subclasses__():
        if sub.__module__ == __name__ and "code" in sub.__dict__:
            yield sub
        yield from _leaves(sub)


# code -> class, for every class above that names a code.
ERROR_CLASSES: dict[str, type[OutreachError]] = {cls.code: cls for cls in _leaves(OutreachError)}


def error_class(code: str | None, status: int) -> type[OutreachError]:
    """The class for an envelope code; for a code unknown to this SDK, its status family's."""
    if code in ERROR_CLASSES:
        return ERROR_CLASSES[code]
    if status >= 500:
        return ServerError
    return STATUS_FAMILIES.get(status, OutreachError)


__all__ = [
    "ERROR_CLASSES",
    "STATUS_FAMILIES",
    "error_class",
    "OutreachError",
    "APIConnectionError",
    "APIResponseError",
    "ServerError",
    *(cls.__name__ for cls in STATUS_FAMILIES.values()),
    *(cls.__name__ for cls in ERROR_CLASSES.values()),
]
