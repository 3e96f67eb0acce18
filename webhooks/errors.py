"""The API errors of webhooks (webhook endpoints): each class is one code of the registry
(config.api.errors); WebhooksConfig.ready imports this module."""

from config.api.errors import ServiceError


class WebhookNotFound(ServiceError):
    code = "webhook_not_found"
    status = 404
    message = "No such webhook."
    description = "The id is unknown, or belongs to another account."


class WebhookDeliveryNotFound(ServiceError):
    code = "webhook_delivery_not_found"
    status = 404
    message = "No such delivery."
    description = "The delivery id is unknown, or belongs to another webhook or account."


class WebhookDisabled(ServiceError):
    code = "webhook_disabled"
    status = 409
    message = "The webhook is disabled. Enable it (PATCH disabled_at: null) first."
    description = (
        "Redeliver and replay need an enabled webhook: enable it with "
        "`PATCH /webhooks/:id` with `disabled_at: null`, then try again. "
        "A test delivery works on a disabled webhook."
    )


class DeliveryNotRedeliverable(ServiceError):
    code = "delivery_not_redeliverable"
    status = 409
    message = "This delivery cannot be redelivered."
    description = (
        "`details.reason` says why: `in_progress` (its next attempt is already scheduled), "
        "`pruned` (its event was deleted by the retention sweep) or `test` (a test "
        "delivery: send another test)."
    )
