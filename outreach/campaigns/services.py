"""Writes for campaigns: create, update, pause, resume. Views validate, then call these."""

from collections.abc import Sequence
from typing import Any

from django.db import transaction
from django.utils import timezone

from accounts.models import Account
from config.api.errors import ValidationFailed
from outreach.errors import CampaignNotDispatchable
from outreach.models.campaigns import Campaign, CampaignStep

# --- Campaigns -----------------------------------------------------------------------


def _steps_replace(*, campaign: Campaign, steps: Sequence[dict[str, Any]]) -> None:
    """Steps are edited in place by position, so a step keeps its row (and anything the
    sending engine links to it) while its position exists."""
    existing = {step.position: step for step in campaign.steps.all()}
    for position, data in enumerate(steps, start=1):
        step = existing.get(position) or CampaignStep(campaign=campaign, position=position)
        step.subject = data.get("subject", "")
        step.body_text = data["body_text"]
        step.body_html = data.get("body_html") or ""
        step.delay_minutes = data.get("delay_minutes", 0)
        step.variants = [
            {
                "subject": variant.get("subject", ""),
                "body_text": variant["body_text"],
                "body_html": variant.get("body_html") or "",
            }
            for variant in data.get("variants") or []
        ]
        step.save()
    CampaignStep.objects.filter(campaign=campaign, position__gt=len(steps)).delete()


_CAMPAIGN_FIELDS = (
    "name",
    "timezone",
    "send_window",
    "bounce_threshold_percent",
    "track_opens",
    "track_clicks",
    "stop_on_reply",
    "stop_on_domain_reply",
    "unsubscribe_footer",
    "send_in_contact_timezone",
    "require_authenticated_domain",
    "max_per_recipient_domain_per_day",
)


def _settings_set(campaign: Campaign, data: dict[str, Any]) -> None:
    for name in _CAMPAIGN_FIELDS:
        if name in data:
            setattr(campaign, name, data[name])


@transaction.atomic
def campaign_create(*, account: Account, data: dict[str, Any]) -> Campaign:
    campaign = Campaign(account=account)
    _settings_set(campaign, data)
    campaign.save()
    if data.get("steps"):
        _steps_replace(campaign=campaign, steps=data["steps"])
    if data.get("credentials"):
        campaign.credentials.set(data["credentials"])
    return campaign


@transaction.atomic
def campaign_update(*, campaign: Campaign, data: dict[str, Any]) -> Campaign:
    _settings_set(campaign, data)
    campaign.save()
    if "steps" in data:
        _steps_replace(campaign=campaign, steps=data["steps"])
    if "credentials" in data:
        campaign.credentials.set(data["credentials"])
    return campaign


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
