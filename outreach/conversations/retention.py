"""Retention of conversation bodies: REPLY_RETENTION_DAYS after a reply arrived, its
text, new_text and HTML are deleted, and so are the bodies of the responses written that
long ago; the metadata (who, when, subject, label, status, attachments' names) stays
(docs/conversations.md, "Privacy and bounds")."""

from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from outreach.models.conversations import Reply, ReplyResponse

# Rows purged per UPDATE: short transactions, bounded locks.
PURGE_CHUNK = 1000


def replies_purge(*, now: datetime | None = None) -> int:
    """Purge the bodies of replies older than REPLY_RETENTION_DAYS (0: never).
    Returns how many were purged."""
    days = settings.REPLY_RETENTION_DAYS
    if days <= 0:
        return 0
    now = now or timezone.now()
    cutoff = now - timedelta(days=days)
    purged = 0
    while True:
        ids = list(
            Reply.objects.filter(body_purged_at__isnull=True, received_at__lt=cutoff)
            .order_by("received_at")
            .values_list("pk", flat=True)[:PURGE_CHUNK]
        )
        if not ids:
            break
        purged += Reply.objects.filter(pk__in=ids, body_purged_at__isnull=True).update(
            text="", new_text="", html="", body_purged_at=now, updated_at=now
        )
    # Responses still being sent keep their body until they are sent or failed.
    while True:
        ids = list(
            ReplyResponse.objects.filter(created_at__lt=cutoff)
            .exclude(status=ReplyResponse.Status.QUEUED)
            .exclude(body_text="", body_html="")
            .values_list("pk", flat=True)[:PURGE_CHUNK]
        )
        if not ids:
            return purged
        ReplyResponse.objects.filter(pk__in=ids).update(body_text="", body_html="", updated_at=now)
