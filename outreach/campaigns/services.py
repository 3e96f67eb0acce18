"""Writes for campaigns: create, update. Views validate, then call these. A campaign's
status changes in outreach.campaigns.state."""

from collections.abc import Sequence
from typing import Any

from django.db import transaction
from django.utils import timezone

from accounts.models import Account
from config.db.rows import row_change
from outreach.campaigns import simulated
from outreach.campaigns.followup_fields import on_complete_stored
from outreach.errors import CampaignNotFound
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
    "on_reply",
)


def _settings_set(campaign: Campaign, data: dict[str, Any]) -> None:
    for name in _CAMPAIGN_FIELDS:
        if name in data:
            setattr(campaign, name, data[name])
    if "on_complete" in data:
        campaign.on_complete = on_complete_stored(
            data["on_complete"], current=campaign.on_complete, now=timezone.now()
        )


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
    # On the row as it is now (config.db.rows): a completion or an automatic pause the
    # engine recorded since the request read it stays.
    campaign = row_change(
        campaign, lambda current: _settings_set(current, data), missing=CampaignNotFound
    )
    if "steps" in data:
        _steps_replace(campaign=campaign, steps=data["steps"])
    if "credentials" in data:
        simulated.credentials_check(campaign=campaign, credentials=data["credentials"])
        campaign.credentials.set(data["credentials"])
    return campaign
