"""Dispatch: enroll and schedule a campaign's contacts (and one contact: outreach_create)."""

import logging
from collections.abc import Sequence
from datetime import datetime
from uuid import UUID

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from accounts.models import Account, ApiKey
from accounts.send_limits import key_sends_count
from billing.usage import plan_limit_enforce
from config.api.errors import ValidationFailed
from outreach.blocklist.selectors import blocked_among, blocked_pending_ids
from outreach.campaigns import simulated
from outreach.campaigns.state import campaign_activate, enabled_credential_exists
from outreach.campaigns.windows import SendWindow, step_send_at, window_timezone
from outreach.contacts.data import ContactData
from outreach.contacts.services import contact_upsert
from outreach.domains.recipients import recipient_refusal
from outreach.enrollments import (
    enrollment_enroll,
    enrollment_schedule,
    enrollments_schedule,
    enrollments_stop,
)
from outreach.errors import CampaignNotDispatchable, ContactBlocked
from outreach.models.campaigns import Campaign, CampaignStep
from outreach.models.sending import Enrollment

logger = logging.getLogger(__name__)

SCHEDULE_SENDS_TASK = "outreach.tasks.schedule_sends"


def _dispatch_lock(campaign: Campaign) -> tuple[Campaign, CampaignStep]:
    """The campaign locked, which serialises its dispatches (and its status change), and
    its step 1, once the checks passed (dispatch_checks). Inside the transaction."""
    locked = (
        Campaign.objects.select_for_update(no_key=True)
        .select_related("account")
        .get(pk=campaign.pk)
    )
    return locked, dispatch_checks(locked)


def dispatch_checks(campaign: Campaign) -> CampaignStep:
    """409 when the campaign cannot send, then 402 when the plan's cap is reached.
    Returns step 1."""
    reasons = []
    first_step = campaign.steps.order_by("position").first()
    if first_step is None:
        reasons.append("no_steps")
    if not enabled_credential_exists(campaign):
        reasons.append("no_enabled_credential")
    if reasons:
        words = {"no_steps": "no steps", "no_enabled_credential": "no enabled SMTP credential"}
        raise CampaignNotDispatchable(
            f"The campaign cannot be dispatched: {' and '.join(words[r] for r in reasons)}.",
            details={"reasons": reasons},
        )
    if not simulated.campaign_simulated(campaign.pk):  # nothing a simulator sends counts
        plan_limit_enforce(account=campaign.account)
    assert first_step is not None  # no_steps was raised otherwise
    return first_step


def first_send_at(
    campaign: Campaign, first_step: CampaignStep, now: datetime, *, contact_timezone: str = ""
) -> datetime:
    """When step 1 of a contact dispatched at `now` is due (its next_send_at): the step's
    delay, then the send window's next opening in the contact's zone (window_timezone).
    The dispatch, the one-call outreach and their previews (dispatch_preview) read it."""
    return step_send_at(
        after=now,
        delay_minutes=first_step.delay_minutes,
        timezone=window_timezone(campaign=campaign, contact_timezone=contact_timezone),
        window=SendWindow.from_json(campaign.send_window),
    )


def contact_zones_used(campaign: Campaign) -> bool:
    """Whether step 1's time depends on each contact's time zone: the campaign sends in
    contact time zones and has a window (without one, every zone gives the same time)."""
    return bool(campaign.send_in_contact_timezone and campaign.send_window)


def not_suppressed(prefix: str = "contact__") -> Q:
    return Q(**{f"{prefix}unsubscribed_at__isnull": True, f"{prefix}bounced_at__isnull": True})


def campaign_dispatch(
    *,
    campaign: Campaign,
    contact_ids: Sequence[UUID] | None = None,
    now: datetime | None = None,
    api_key: ApiKey | None = None,
) -> int:
    """Move pending enrollments (all of them, or those of `contact_ids`) to scheduled with
    step 1's send time. One set-based UPDATE, whatever the count. Suppressed contacts'
    enrollments stay pending and are not counted; those the account's blocklist names
    are stopped (`blocked`). The dispatched are counted against `api_key`'s daily send
    limit, in the same transaction: past it, nothing is dispatched
    (KeySendLimitReached). Returns the number dispatched. In the caller's transaction
    without a savepoint: a refusal fails it whole (an approval's run, which records
    a refusal and goes on, opens its own savepoint)."""
    now = now or timezone.now()
    with transaction.atomic(savepoint=False):
        campaign, first_step = _dispatch_lock(campaign)
        _blocked_stop(campaign, contact_ids, now)
        pending = Enrollment.objects.filter(
            campaign=campaign, status=Enrollment.Status.PENDING
        ).filter(not_suppressed())
        if contact_ids is not None:
            pending = pending.filter(contact_id__in=list(contact_ids))
        # One UPDATE per window time zone: the campaign's, or with contact time zones,
        # one per distinct zone among the contacts (a few hundred at most).
        zones = [""]
        if contact_zones_used(campaign):
            zones = list(pending.order_by().values_list("contact__timezone", flat=True).distinct())
        dispatched, due_now = 0, False
        for zone in zones:
            send_at = first_send_at(campaign, first_step, now, contact_timezone=zone)
            rows = pending.filter(contact__timezone=zone) if len(zones) > 1 else pending
            count = enrollments_schedule(
                rows, next_send_at=send_at, now=now, current_key=first_step.key
            )
            dispatched += count
            due_now = due_now or (count > 0 and send_at <= now)
        key_sends_count(api_key=api_key, count=dispatched, now=now)
        campaign_activate(campaign=campaign, at=now)
        if due_now:
            transaction.on_commit(sends_schedule_soon, robust=True)
    return dispatched


def dispatch_candidates_count(*, campaign: Campaign, contact_ids: Sequence[UUID] | None) -> int:
    """How many contacts a dispatch would move now (at most): its pending, unsuppressed
    enrollments. What a drafter's dispatch is checked against its key's limit with when
    asked; the count is exact when the approval runs."""
    pending = Enrollment.objects.filter(campaign=campaign, status=Enrollment.Status.PENDING)
    if contact_ids is not None:
        pending = pending.filter(contact_id__in=list(contact_ids))
    return pending.filter(not_suppressed()).count()


def _blocked_stop(campaign: Campaign, contact_ids: Sequence[UUID] | None, now: datetime) -> None:
    """Stop the pending enrollments of blocked contacts (outreach.blocklist), counted."""
    blocked = blocked_pending_ids(
        campaign_id=campaign.pk, account_id=campaign.account_id, contact_ids=contact_ids
    )
    if blocked:
        enrollments_stop(
            Enrollment.objects.filter(pk__in=blocked),
            campaign_id=campaign.pk,
            reason=Enrollment.StopReason.BLOCKED,
            at=now,
        )


def sends_schedule_soon() -> None:
    """Run the send scheduler now rather than at its next tick (up to
    SENDING_SCHEDULE_INTERVAL_SECONDS away): a dispatch whose first step is due at once
    starts sending as soon as it commits. Never raises: the tick comes anyway."""
    if not settings.SENDING_SCHEDULE_ON_DISPATCH:
        return

    # By name, as the broker knows it (outreach.sending.beat holds the task): sending
    # sits above campaigns and reads them, so campaigns never import it. A signature, not
    # the registry: a web process never imports the task's module, and a signature of a
    # task it does not know is sent by name.
    try:
        current_app.signature(SCHEDULE_SENDS_TASK).apply_async(
            retry=False, expires=settings.SENDING_SCHEDULE_INTERVAL_SECONDS
        )
    except Exception:
        logger.warning("send scheduler not rung; its next tick runs it", exc_info=True)


# --- Outreaches ----------------------------------------------------------------------


def outreach_create(
    *,
    account: Account,
    campaign: Campaign,
    contact: ContactData,
    now: datetime | None = None,
    api_key: ApiKey | None = None,
) -> tuple[Enrollment, bool]:
    """Upsert the contact, enroll it, dispatch that one enrollment (counted against
    `api_key`'s daily send limit). Returns (enrollment, changed): changed is False when
    the contact was already enrolled and dispatched (a no-op)."""
    now = now or timezone.now()
    # Before the campaign's lock: the lookups may take DNS_TIMEOUT_SECONDS.
    refusal = recipient_refusal(contact.email)
    if refusal:
        raise ValidationFailed({"contact.email": [refusal]})
    with transaction.atomic():
        campaign, first_step = _dispatch_lock(campaign)
        simulated.address_check(campaign_id=campaign.pk, email=contact.email)
        entry = blocked_among(account_id=account.pk, emails=[contact.key]).get(contact.key)
        if entry is not None:
            raise ContactBlocked(details={"reason": "blocked", "entry": entry})
        row, _ = contact_upsert(account=account, data=contact)
        if row.is_suppressed:
            why = "unsubscribed" if row.unsubscribed_at else "bounced"
            raise ValidationFailed(
                {"contact.email": [f"This contact has {why}; it is never enrolled again."]}
            )
        enrollment, created = enrollment_enroll(campaign_id=campaign.pk, contact_id=row.pk)
        changed = created
        send_at = first_send_at(campaign, first_step, now, contact_timezone=row.timezone)
        if enrollment_schedule(
            enrollment, next_send_at=send_at, now=now, current_key=first_step.key
        ):
            changed = True
            key_sends_count(api_key=api_key, count=1, now=now)
            if send_at <= now:
                transaction.on_commit(sends_schedule_soon, robust=True)
        campaign_activate(campaign=campaign, at=now)
    enrollment.contact = row
    return enrollment, changed
