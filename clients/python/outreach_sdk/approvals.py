"""Approvals: what a drafter key asked to send, held until an admin or sender key
decides. With a drafter key, `campaigns.dispatch`, `outreaches.create` and
`replies.respond` return an `Approval` (nothing sent) instead of their result."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from outreach_sdk._transport import Transport
from outreach_sdk.models import Model

M = TypeVar("M", bound=Model)


@dataclass
class KeyRef(Model):
    api_key_id: str = ""
    prefix: str = ""


@dataclass
class Approval(Model):
    """`status`: `pending`, `approved`, `rejected`, `expired` or `failed`; `outcome`:
    what the send did (approved) or what refused it (failed)."""

    id: str = ""
    action: str = ""
    campaign_id: str | None = None
    contact_ids: list[str] | None = None
    contact: dict[str, Any] | None = None
    reply_id: str | None = None
    body_text: str = ""
    body_html: str = ""
    requested_by: KeyRef = field(default_factory=KeyRef)
    decided_by: KeyRef | None = None
    status: str = ""
    reason: str = ""
    outcome: dict[str, Any] | None = None
    created_at: datetime | None = None
    decided_at: datetime | None = None
    expires_at: datetime | None = None

    @classmethod
    def from_api(cls, data: dict[str, Any]):
        approval = super().from_api(data)
        if isinstance(data.get("decided_by"), dict):
            approval.decided_by = KeyRef.from_api(data["decided_by"])
        return approval

    @property
    def pending(self) -> bool:
        return self.status == "pending"


def is_approval(body: Any) -> bool:
    """Whether a send's answer is an approval (a drafter key's send, held)."""
    return isinstance(body, dict) and "requested_by" in body and "action" in body


def sent_or_held(model: type[M], body: dict[str, Any]) -> M | Approval:
    return Approval.from_api(body) if is_approval(body) else model.from_api(body)


class Approvals:
    def __init__(self, transport: Transport):
        self._t = transport

    def list(self, *, status: str | None = None, limit: int | None = None) -> Iterator[Approval]:
        """Newest first, every page; `status` filters (`pending`, ...)."""
        params = {k: v for k, v in {"status": status, "limit": limit}.items() if v is not None}
        for page in self._t.pages("/approvals", params):
            for item in page:
                yield Approval.from_api(item)

    def retrieve(self, approval_id: str) -> Approval:
        return Approval.from_api(self._t.json("GET", f"/approvals/{approval_id}"))

    def approve(self, approval_id: str, *, idempotency_key: str | None = None) -> Approval:
        """Run the held send once (an admin or sender key). `status` is then `approved`,
        or `failed` with what refused it in `outcome`. ApprovalNotPending when it was
        decided already or expired (nothing sent)."""
        body = self._t.json(
            "POST",
            f"/approvals/{approval_id}/approve",
            idempotent=True,
            idempotency_key=idempotency_key,
        )
        return Approval.from_api(body)

    def reject(
        self, approval_id: str, *, reason: str | None = None, idempotency_key: str | None = None
    ) -> Approval:
        body = self._t.json(
            "POST",
            f"/approvals/{approval_id}/reject",
            json_body={} if reason is None else {"reason": reason},
            idempotent=True,
            idempotency_key=idempotency_key,
        )
        return Approval.from_api(body)
