"""The audit log's writes (docs/audit.md): a row for each change, and retention.

`audit_event_write` is the writer config.api.audit calls (registered in
AccountsConfig.ready), inside the transaction of the change it records: who (the API key,
the staff user, or the public for a signup), from where (the client's address by the
service's one rule, accounts.throttling.client_ip), the request's id and Idempotency-Key.
Values never reach it: a record carries field names only.
"""

import ipaddress
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from accounts.models import ApiKey, AuditEvent
from accounts.throttling import client_ip
from config.api.audit import AuditRecord
from config.request_id import current_request_id

# Rows deleted per statement by the retention task: a short lock, a bounded transaction.
PRUNE_BATCH = 5000


def _actor(request, record: AuditRecord) -> dict[str, str]:
    if record.staff_user is not None:
        user = record.staff_user
        return {
            "actor_type": AuditEvent.ActorType.STAFF,
            "actor_id": str(user.pk),
            "actor_name": user.get_username(),
        }
    key = getattr(request, "auth", None)
    if isinstance(key, ApiKey):
        return {
            "actor_type": AuditEvent.ActorType.API_KEY,
            "actor_id": str(key.pk),
            "actor_name": key.prefix,
            "actor_client_kind": key.client_kind,
        }
    return {"actor_type": AuditEvent.ActorType.PUBLIC}


def _ip(request) -> str | None:
    try:
        return str(ipaddress.ip_address(client_ip(request)))
    except ValueError:
        return None


def audit_event_write(request, record: AuditRecord) -> AuditEvent:
    """One row, in the caller's transaction."""
    # Set by accounts.idempotency on the endpoints that honour the header.
    idempotency_key = getattr(request, "idempotency_key", None) or ""
    return AuditEvent.objects.create(
        account_id=record.account_id,
        created_at=timezone.now(),
        action=record.action,
        resource_type=record.resource_type,
        resource_id=record.resource_id[:64],
        changes=record.changes,
        request_id=getattr(request, "request_id", None) or current_request_id(),
        idempotency_key=idempotency_key,
        ip=_ip(request),
        **_actor(request, record),
    )


def audit_events_prune(*, now: datetime | None = None, batch: int = PRUNE_BATCH) -> int:
    """Delete rows older than AUDIT_RETENTION_DAYS, `batch` at a time; safe to run twice
    (or at once: each DELETE takes what is still there)."""
    cutoff = (now or timezone.now()) - timedelta(days=settings.AUDIT_RETENTION_DAYS)
    deleted = 0
    while True:
        ids = list(
            AuditEvent.objects.filter(created_at__lt=cutoff)
            .order_by("created_at")
            .values_list("pk", flat=True)[:batch]
        )
        if not ids:
            return deleted
        count, _ = AuditEvent.objects.filter(pk__in=ids).delete()
        deleted += count
