"""The API errors of accounts (API keys and idempotency): each class is one code of the registry
(config.api.errors); AccountsConfig.ready imports this module."""

from config.api.errors import ServiceError


class ApiKeyNotFound(ServiceError):
    code = "api_key_not_found"
    status = 404
    message = "No such API key."
    description = "The id is unknown, or belongs to another account."


class CannotRevokeLastKey(ServiceError):
    code = "cannot_revoke_last_key"
    status = 422
    message = "The account's last active API key cannot be revoked."
    description = (
        "An account keeps at least one active key, and at least one active `admin` key. "
        "Create another (admin) key first, then revoke this one. `details.reason`: "
        "`last_key` or `last_admin_key`."
    )


class ApiKeyLimitReached(ServiceError):
    code = "api_key_limit_reached"
    status = 422
    message = "The account has as many active API keys as it may hold."
    description = (
        "An account holds at most `API_KEYS_MAX` (20) active keys at once. Revoke one it no "
        "longer uses (`DELETE /api_keys/:id`), then create the new one. `details`: `limit`."
    )


class IdempotencyConflict(ServiceError):
    code = "idempotency_conflict"
    status = 409
    message = "This Idempotency-Key was used with a different request."
    description = (
        "Within 24 hours an Idempotency-Key may only be reused with the same method, path and body."
    )


class IdempotencyInProgress(ServiceError):
    code = "idempotency_in_progress"
    status = 409
    message = "A request with this Idempotency-Key is still being processed."
    description = "Wait for the first request to finish, then retry to receive its response."


class EmailUnverified(ServiceError):
    code = "email_unverified"
    status = 403
    message = "Confirm your signup address first: open the link emailed to it."
    description = (
        "A new account proves its signup address before its first `POST /campaigns/:id/dispatch` "
        "or `POST /outreaches`: signup emails it a link. No email, or the link expired? "
        "`POST /signup/verification` (with your API key) sends a new one. `details`: `email` "
        "(where the link goes), `resend_url`."
    )


class KeySendLimitReached(ServiceError):
    code = "key_send_limit_reached"
    status = 403
    message = "This API key has reached its daily send limit."
    description = (
        "A key with a `daily_send_limit` may dispatch, enrol or answer that many contacts per "
        "UTC day; a request that would pass it is refused whole (nothing of it is sent). "
        "`details`: `limit`, `used` (before this request), `resets_at` (the next UTC midnight). "
        "A drafter's approval is checked when asked and again when approved."
    )
