"""`client.audit_events`: the account's audit log (an admin key's)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

from outreach_sdk import models
from outreach_sdk._transport import Transport


def _since(value: datetime | str | None) -> str | None:
    if not isinstance(value, datetime):
        return value
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    return value.isoformat() + "Z"


class AuditEvents:
    def __init__(self, transport: Transport):
        self._t = transport

    def list(
        self,
        *,
        api_key_id: str | None = None,
        resource_type: str | None = None,
        resource_id: str | None = None,
        action: str | None = None,
        since: datetime | str | None = None,
        limit: int | None = None,
    ) -> Iterator[models.AuditEvent]:
        """Newest first, every page. `since` is inclusive (a naive datetime is UTC);
        `action` e.g. `campaign.update`."""
        params = {
            "api_key_id": api_key_id,
            "resource_type": resource_type,
            "resource_id": resource_id,
            "action": action,
            "since": _since(since),
            "limit": limit,
        }
        for page in self._t.pages("/audit_events", params):
            for item in page:
                yield models.AuditEvent.from_api(item)
