"""Holding a drafter's send, and the one owner of an approval's status change.

An approval leaves `pending` only through `approval_settle`: a conditional UPDATE from
`pending`, so of two deciders (or a decider and the expiry) exactly one wins, and the
loser changes nothing.
"""

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from outreach.approvals.serializers import approval_data
from outreach.events import approval_emit
from outreach.models.approvals import Approval
from webhooks.models import APPROVAL_DECIDED, APPROVAL_REQUESTED

logger = logging.getLogger(__name__)

EXPIRE_BATCH = 1000


def approval_request(
    *,
    api_key,
    action: str,
    campaign_id=None,
    contact_ids: list | None = None,
    contact: dict | None = None,
    reply_id=None,
    body_text: str = "",
    body_html: str = "",
    now: datetime | None = None,
) -> Approval:
    """Hold what `api_key` (a drafter) asked to send, pending for APPROVAL_TTL_HOURS;
    approval.requested in the same transaction. Nothing is sent."""
    now = now or timezone.now()
    with transaction.atomic():
        approval = Approval.objects.create(
            account_id=api_key.account_id,
            action=action,
            campaign_id=campaign_id,
            contact_ids=[str(c) for c in contact_ids] if contact_ids is not None else None,
            contact=contact,
            reply_id=reply_id,
            body_text=body_text,
            body_html=body_html,
            requested_by=api_key,
            created_at=now,
            expires_at=now + timedelta(hours=settings.APPROVAL_TTL_HOURS),
        )
        approval_emit(
            account_id=approval.account_id,
            event_type=APPROVAL_REQUESTED,
            data=lambda: approval_data(approval),
        )
    logger.info(
        "approval requested account=%s approval=%s action=%s key=%s",
        approval.account_id,
        approval.pk,
        action,
        api_key.prefix,
    )
    return approval


def approval_settle(
    *,
    approval: Approval,
    status: str,
    now: datetime,
    decided_by=None,
    reason: str = "",
    outcome: dict | None = None,
) -> bool:
    """pending -> `status`, with approval.decided, in the caller's transaction. False
    (nothing changed) when it was not pending any more."""
    changed = Approval.objects.filter(pk=approval.pk, status=Approval.Status.PENDING).update(
        status=status, decided_by=decided_by, decided_at=now, reason=reason, outcome=outcome
    )
    if not changed:
        return False
    approval.status, approval.decided_by, approval.decided_at = status, decided_by, now
    approval.reason, approval.outcome = reason, outcome
    approval_emit(
        account_id=approval.account_id,
        event_type=APPROVAL_DECIDED,
        data=lambda: approval_data(approval),
    )
    return True


def approvals_expire(*, now: datetime | None = None) -> int:
    """Beat: pending approvals past expires_at become `expired`. Safe to run twice, or
    beside a decision: each row is settled from `pending` at most once, and rows a
    decider holds locked are left to it. Returns how many expired."""
    now = now or timezone.now()
    expired = 0
    while True:
        with transaction.atomic():
            batch = list(
                Approval.objects.select_for_update(skip_locked=True, of=("self",))
                .select_related("requested_by", "decided_by")
                .filter(status=Approval.Status.PENDING, expires_at__lte=now)
                .order_by("expires_at")[:EXPIRE_BATCH]
            )
            for approval in batch:
                expired += approval_settle(
                    approval=approval,
                    status=Approval.Status.EXPIRED,
                    now=now,
                    outcome={"code": "expired", "message": "Not decided in time."},
                )
        if len(batch) < EXPIRE_BATCH:
            return expired


def held_for_approval(api_key) -> bool:
    """Whether the key's sends wait for a person: a drafter's do (config.api.roles)."""
    return getattr(api_key, "role", None) == "drafter"
