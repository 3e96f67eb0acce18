"""The API errors of webhooks (webhook endpoints): each class is one code of the registry
(config.api.errors); WebhooksConfig.ready imports this module."""

from config.api.errors import ServiceError


class WebhookNotFound(ServiceError):
    code = "webhook_not_found"
    status = 404
    message = "No such webhook."
    description = "The id is unknown, or belongs to another account."
