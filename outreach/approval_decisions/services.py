"""Deciding an approval: reject it, or approve it and run its send once.

The approval row is locked for the decision, and it leaves `pending` through
outreach.approvals.services.approval_settle in the same transaction as the send: two
approvals at once (a double click, two threads, a retry) run one send, and the second
finds it no longer pending (409 approval_not_pending). The send runs as it would run
now, checked now: the plan's soft cap, suppression, the blocklist, the signup address,
the requesting key's daily send limit (it counts against that key, the drafter's) and
the requesting key itself (revoked or expired since: it fails). What refuses it makes
the approval `failed`, with the refusal in `outcome`; nothing of a failed send remains.
"""

import logging
from collections.abc import Callable
from datetime import datetime
from uuid import UUID

from django.db import transaction
from django.utils import timezone

from accounts.models import Account, ApiKey
from accounts.verification import email_verified_check
from config.api.errors import ServiceError, ValidationFailed
from outreach.approvals.services import approval_settle
from outreach.campaigns.dispatch import campaign_dispatch, outreach_create
from outreach.campaigns.serializers import OutreachSerializer
from outreach.contacts.data import InvalidContactData, contact_data_clean
from outreach.contacts.selectors import requested_campaign
from outreach.conversations.respond import response_create
from outreach.errors import ApprovalNotPending, CampaignNotFound, ReplyNotFound
from outreach.models.approvals import Approval
from outreach.models.campaigns import Campaign
from outreach.models.conversations import Reply

logger = logging.getLogger(__name__)


class RequesterInactive(Exception):
    """The key that asked was revoked or expired since: its sends do not run."""


def _dispatch_run(approval: Approval, account: Account, key: ApiKey) -> dict:
    campaign = None
    if approval.campaign_id is not None:
        campaign = Campaign.objects.filter(account=account, pk=approval.campaign_id).first()
    if campaign is None:
        raise CampaignNotFound()
    email_verified_check(account)
    ids = None if approval.contact_ids is None else [UUID(c) for c in approval.contact_ids]
    return {"dispatched": campaign_dispatch(campaign=campaign, contact_ids=ids, api_key=key)}


def _outreach_run(approval: Approval, account: Account, key: ApiKey) -> dict:
    email_verified_check(account)
    serializer = OutreachSerializer(
        data={"campaign_id": str(approval.campaign_id), "contact": approval.contact}
    )
    if not serializer.is_valid():
        raise ValidationFailed(serializer.errors)
    campaign = requested_campaign(account=account, campaign_id=approval.campaign_id)
    assert campaign is not None  # campaign_id is set on every outreach approval
    try:
        contact = contact_data_clean(serializer.validated_data["contact"])
    except InvalidContactData as exc:  # pragma: no cover - the serializer checked it
        raise ValidationFailed({f"contact.{exc.field_name}": [exc.message]}) from None
    enrollment, changed = outreach_create(
        account=account, campaign=campaign, contact=contact, api_key=key
    )
    return {"enrollment_id": str(enrollment.pk), "changed": changed}


def _respond_run(approval: Approval, account: Account, key: ApiKey) -> dict:
    reply = None
    if approval.reply_id is not None:
        reply = (
            Reply.objects.select_related("credential", "contact")
            .filter(account=account, pk=approval.reply_id)
            .first()
        )
    if reply is None:
        raise ReplyNotFound()
    response = response_create(
        account=account,
        reply=reply,
        body_text=approval.body_text,
        body_html=approval.body_html,
        api_key=key,
    )
    return {"response_id": str(response.pk)}


_RUNS: dict[str, Callable[[Approval, Account, ApiKey], dict]] = {
    Approval.Action.DISPATCH: _dispatch_run,
    Approval.Action.OUTREACH: _outreach_run,
    Approval.Action.RESPOND: _respond_run,
}


def _run(approval: Approval, account: Account) -> tuple[str, dict]:
    """(status, outcome) of running the held send now, in a savepoint: a refusal
    leaves nothing of it."""
    key = ApiKey.objects.get(pk=approval.requested_by_id)
    try:
        if not key.is_active:
            raise RequesterInactive()
        with transaction.atomic():
            return Approval.Status.APPROVED, _RUNS[approval.action](approval, account, key)
    except RequesterInactive:
        return Approval.Status.FAILED, {
            "code": "requester_inactive",
            "message": "The key that asked was revoked or has expired.",
            "details": None,
        }
    except ServiceError as exc:
        return Approval.Status.FAILED, {
            "code": exc.code,
            "message": exc.message,
            "details": exc.details,
        }


def approval_decide(
    *,
    account: Account,
    approval_id,
    decider: ApiKey,
    approve: bool,
    reason: str = "",
    now: datetime | None = None,
) -> Approval:
    """Approve (run once) or reject a pending approval of the account.
    ApprovalNotPending (nothing sent) when it was decided already or has expired."""
    now = now or timezone.now()
    with transaction.atomic():
        approval = (
            Approval.objects.select_for_update(of=("self",))
            .select_related("requested_by")
            .get(account=account, pk=approval_id)
        )
        status = approval.status
        if status == Approval.Status.PENDING and approval.expires_at <= now:
            status = Approval.Status.EXPIRED  # beat has not marked it yet
        if status != Approval.Status.PENDING:
            raise ApprovalNotPending(details={"status": status})
        if approve:
            status, outcome = _run(approval, account)
        else:
            status, outcome = Approval.Status.REJECTED, None
        approval_settle(
            approval=approval,
            status=status,
            now=now,
            decided_by=decider,
            reason=reason,
            outcome=outcome,
        )
    logger.info(
        "approval decided account=%s approval=%s status=%s key=%s",
        account.pk,
        approval.pk,
        approval.status,
        decider.prefix,
    )
    return approval
