"""Webhook management: registering, changing, re-keying and deleting an account's
webhooks."""

import logging
from dataclasses import dataclass

from django.utils import timezone

from config.api.errors import ValidationFailed
from config.db.rows import row_change
from webhooks.errors import WebhookNotFound
from webhooks.models import Webhook
from webhooks.secrets import secret_generate

logger = logging.getLogger(__name__)

__all__ = [
    "IssuedSecret",
    "webhook_create",
    "webhook_delete",
    "webhook_rotate_secret",
    "webhook_update",
]

MAX_WEBHOOKS_PER_ACCOUNT = 100


@dataclass(frozen=True)
class IssuedSecret:
    webhook: Webhook
    secret: str


def webhook_create(*, account, url: str, event_filters: list[str]) -> IssuedSecret:
    if Webhook.objects.filter(account=account).count() >= MAX_WEBHOOKS_PER_ACCOUNT:
        raise ValidationFailed(
            {"webhook": [f"An account can register at most {MAX_WEBHOOKS_PER_ACCOUNT} webhooks."]}
        )
    secret = secret_generate()
    webhook = Webhook.objects.create(
        account=account,
        url=url,
        event_filters=event_filters,
        secret=secret,
    )
    return IssuedSecret(webhook=webhook, secret=secret)


_UNSET = object()


def webhook_update(
    *, webhook: Webhook, url=_UNSET, event_filters=_UNSET, disabled_at=_UNSET
) -> Webhook:
    """Changes what is given, on the row as it is now (config.db.rows.row_change: the
    deliveries write its failure count and may disable it meanwhile; a webhook deleted
    since it was read is WebhookNotFound). `disabled_at=None` re-enables and clears the
    failure count; any timestamp disables (recording the server's time, not the one
    given). The secret never changes here."""

    def change(current: Webhook) -> None:
        if url is not _UNSET:
            current.url = url
        if event_filters is not _UNSET:
            current.event_filters = event_filters
        if disabled_at is None:
            current.disabled_at = None
            current.consecutive_failures = 0
        elif disabled_at is not _UNSET and current.disabled_at is None:
            current.disabled_at = timezone.now()

    return row_change(webhook, change, missing=WebhookNotFound)


def webhook_rotate_secret(*, webhook: Webhook) -> IssuedSecret:
    """A new secret, effective for the next attempt: the old one signs nothing more."""
    secret = secret_generate()
    webhook.secret = secret
    webhook.save(update_fields=["secret"])
    return IssuedSecret(webhook=webhook, secret=secret)


def webhook_delete(*, webhook: Webhook) -> None:
    """Deletes the webhook, its delivery jobs and its delivery rows (cascade)."""
    webhook.delete()
