"""Reads."""

from django.db.models import QuerySet

from config.api.ids import is_uuid
from webhooks.models import Webhook, WebhookDelivery


def webhook_list(webhooks: QuerySet[Webhook]) -> QuerySet[Webhook]:
    """Webhooks (an account's, as the API's scoped base gives them: at most
    MAX_WEBHOOKS_PER_ACCOUNT), newest first."""
    return webhooks.order_by("-created_at", "-id")


def delivery_list(*, webhook: Webhook, limit: int) -> list[WebhookDelivery]:
    """The webhook's attempt rows, newest first."""
    return list(
        WebhookDelivery.objects.filter(webhook=webhook).order_by("-created_at", "-id")[:limit]
    )


def delivery_of(*, webhook: Webhook, delivery_id: str) -> WebhookDelivery | None:
    """One attempt row of the webhook, by the id a request gave (None for any other)."""
    if not is_uuid(delivery_id):
        return None
    return WebhookDelivery.objects.filter(id=delivery_id, webhook=webhook).first()
