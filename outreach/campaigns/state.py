"""Every change of a campaign's status: the one place it is written.

    draft     -> active     dispatch                        campaign_activate
    completed -> active     dispatch of more contacts       campaign_activate
    active    -> paused     by hand                         campaign_pause
    active    -> paused     no enabled mailbox left         campaigns_pause_if_unsendable
    paused    -> active     resume                          campaign_resume
    active    -> completed  no active enrollment left       campaigns_complete_if_done

Each function is one transition: a conditional UPDATE (the status it leaves re-checked
on the row, so a transition that lost a race changes nothing), the pause for want of a
mailbox after locking the campaigns, and the webhook event of the transition where it
has one (`campaign.paused` when no mailbox is left), in the caller's transaction.
Callers are the
campaigns API (pause, resume), dispatch (activate), the sending engine (completion after
a batch, after recovered claims; pause when no mailbox can send) and intake (an
enrollment ended by a reply, unsubscribe, complaint or bounce; a mailbox disabled by its
bounce rate). tests/outreach/test_campaign_transitions.py fails on a campaign status
written anywhere else.
"""

from datetime import datetime

from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from config.api.errors import ValidationFailed
from outreach.errors import CampaignNotDispatchable
from outreach.events import campaign_paused_emit
from outreach.models.campaigns import Campaign
from outreach.models.sending import Enrollment

# ---------------------------------------------------------------- draft, completed: active

_ACTIVATED_FROM = (Campaign.Status.DRAFT, Campaign.Status.COMPLETED)


def campaign_activate(*, campaign: Campaign, at: datetime) -> bool:
    """draft or completed -> active: dispatch starts a draft campaign, and restarts a
    completed one. A paused campaign stays paused: its new enrollments wait for resume.
    Called by dispatch, which holds the campaign's row lock. Returns whether it moved."""
    if campaign.status not in _ACTIVATED_FROM:
        return False
    moved = Campaign.objects.filter(pk=campaign.pk, status__in=_ACTIVATED_FROM).update(
        status=Campaign.Status.ACTIVE, updated_at=at
    )
    if moved:
        campaign.status = Campaign.Status.ACTIVE
    return bool(moved)


# ---------------------------------------------------------------- active: paused, by hand


def campaign_pause(*, campaign: Campaign) -> Campaign:
    """active -> paused (manual). Pausing a paused campaign changes nothing."""
    if campaign.status == Campaign.Status.PAUSED:
        return campaign
    if campaign.status != Campaign.Status.ACTIVE:
        raise ValidationFailed(
            {"status": [f"Only an active campaign can be paused; this one is {campaign.status}."]}
        )
    updated = Campaign.objects.filter(pk=campaign.pk, status=Campaign.Status.ACTIVE).update(
        status=Campaign.Status.PAUSED,
        paused_reason=Campaign.PausedReason.MANUAL,
        paused_at=timezone.now(),
        updated_at=timezone.now(),
    )
    campaign.refresh_from_db()
    if not updated and campaign.status != Campaign.Status.PAUSED:
        # It changed state between our read and the update.
        raise ValidationFailed({"status": [f"The campaign is now {campaign.status}."]})
    return campaign


# ---------------------------------------------------------------- paused: active


def enabled_credential_exists(campaign: Campaign) -> bool:
    return campaign.credentials.filter(disabled_at__isnull=True).exists()


def campaign_resume(*, campaign: Campaign) -> Campaign:
    """paused -> active, when an enabled credential can carry the sends. Resuming an
    active campaign changes nothing."""
    if campaign.status == Campaign.Status.ACTIVE:
        return campaign
    if campaign.status != Campaign.Status.PAUSED:
        raise ValidationFailed(
            {"status": [f"Only a paused campaign can be resumed; this one is {campaign.status}."]}
        )
    if not enabled_credential_exists(campaign):
        raise CampaignNotDispatchable(
            "The campaign has no enabled SMTP credential; re-enable one or add another first.",
            details={"reasons": ["no_enabled_credential"]},
        )
    Campaign.objects.filter(pk=campaign.pk, status=Campaign.Status.PAUSED).update(
        status=Campaign.Status.ACTIVE,
        paused_reason="",
        paused_at=None,
        updated_at=timezone.now(),
    )
    campaign.refresh_from_db()
    return campaign


# ---------------------------------------------------------------- active: paused, no mailbox


def campaigns_pause_if_unsendable(*, campaign_ids, at: datetime | None = None) -> list:
    """Pause (all_credentials_disabled, one campaign.paused each) those of these active
    campaigns whose credentials are all disabled, or that have none. Returns them."""
    at = at or timezone.now()
    paused = []
    with transaction.atomic():
        # Lock first, then look at the credentials in a later statement: a concurrent
        # disabler of a sibling credential waits here and then sees this one disabled.
        campaigns = list(
            Campaign.objects.select_for_update(no_key=True)
            .filter(pk__in=campaign_ids, status=Campaign.Status.ACTIVE)
            .order_by("pk")
        )
        for campaign in campaigns:
            if campaign.credentials.filter(disabled_at__isnull=True).exists():
                continue
            won = Campaign.objects.filter(pk=campaign.pk, status=Campaign.Status.ACTIVE).update(
                status=Campaign.Status.PAUSED,
                paused_reason=Campaign.PausedReason.ALL_CREDENTIALS_DISABLED,
                paused_at=at,
                updated_at=at,
            )
            if won:
                campaign_paused_emit(
                    campaign=campaign, reason=Campaign.PausedReason.ALL_CREDENTIALS_DISABLED
                )
                paused.append(campaign)
    return paused


# ---------------------------------------------------------------- active: completed


def campaigns_complete_if_done(*, campaign_ids, at: datetime) -> int:
    """Active campaigns without an active enrollment left (pending, scheduled, sent)
    become completed. Returns how many did."""
    active_left = Enrollment.objects.filter(
        campaign_id=OuterRef("pk"), status__in=Enrollment.ACTIVE_STATUSES
    )
    return (
        Campaign.objects.filter(pk__in=list(campaign_ids), status=Campaign.Status.ACTIVE)
        .exclude(Exists(active_left))
        .update(status=Campaign.Status.COMPLETED, updated_at=at)
    )
