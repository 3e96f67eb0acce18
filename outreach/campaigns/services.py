"""Writes for campaigns: create, update. Views validate, then call these. A campaign's
status changes in outreach.campaigns.state."""

from collections.abc import Sequence
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from accounts.models import Account
from config.db.rows import row_change
from outreach.campaigns import edits, simulated
from outreach.campaigns.followup_fields import on_complete_stored
from outreach.errors import CampaignNotFound
from outreach.models.campaigns import Campaign, CampaignStep

# --- Campaigns -----------------------------------------------------------------------


def _steps_replace(*, campaign: Campaign, steps: Sequence[dict[str, Any]]) -> None:
    """Steps are edited by key (API.md 17): an element whose key exists updates its row
    (so a step keeps its row, and anything the sending engine links to it), a new key
    inserts one, a key no longer given deletes its row. Keys default to
    `step_<position>`, so steps given without keys edit in place by position.
    `steps`: resolved (step_serializers.steps_validate)."""
    keys = [step["key"] for step in steps]
    CampaignStep.objects.filter(campaign=campaign).exclude(key__in=keys).delete()
    existing = {step.key: step for step in campaign.steps.all()}
    if any(existing[key].position != position for position, key in _kept(keys, existing)):
        # Out of the way of (campaign, position)'s uniqueness while rows change places.
        CampaignStep.objects.filter(campaign=campaign).update(
            position=F("position") + _POSITION_LIFT
        )
    for position, data in enumerate(steps, start=1):
        step = existing.get(data["key"]) or CampaignStep(campaign=campaign, key=data["key"])
        step.position = position
        _step_fill(step, data)
        step.save()


# Beyond any position a campaign has (at most graph.MAX_ELEMENTS elements).
_POSITION_LIFT = 1000


def _kept(keys: list[str], existing: dict[str, CampaignStep]) -> list[tuple[int, str]]:
    return [(position, key) for position, key in enumerate(keys, start=1) if key in existing]


def _step_fill(step: CampaignStep, data: dict[str, Any]) -> None:
    """An element's columns from its resolved data: a branch's content columns empty."""
    branch = data.get("branch")
    step.branch = branch
    step.next_key = "" if branch is not None else data["next_key"]
    step.subject = data.get("subject", "")
    step.body_text = data.get("body_text", "")
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


# In the caller's transaction without a savepoint (the API's write request opens one):
# a failed change fails it whole, as nothing goes on after it.
@transaction.atomic(savepoint=False)
def campaign_update(*, campaign: Campaign, data: dict[str, Any]) -> Campaign:
    # On the row as it is now (config.db.rows): a completion or an automatic pause the
    # engine recorded since the request read it stays.
    campaign = row_change(
        campaign, lambda current: _settings_set(current, data), missing=CampaignNotFound
    )
    if "steps" in data:
        steps_edit(campaign=campaign, steps=data["steps"])
    if "credentials" in data:
        simulated.credentials_check(campaign=campaign, credentials=data["credentials"])
        campaign.credentials.set(data["credentials"])
    return campaign


def steps_edit(*, campaign: Campaign, steps: Sequence[dict[str, Any]]) -> list[edits.Move]:
    """Replace a campaign's steps (resolved) and move the enrollments waiting at removed
    elements, exactly as the preview of the same steps says (outreach.campaigns.edits),
    in the caller's transaction (the campaign's row locked: edits of one campaign run
    one at a time). Returns the moves."""
    moves = edits.moves_plan(campaign=campaign, steps=steps)
    if edits.positions_change(campaign=campaign, steps=steps):
        edits.claims_give_back(campaign=campaign)
    _steps_replace(campaign=campaign, steps=steps)
    if moves:
        edits.moves_apply(campaign=campaign, moves=moves, steps=steps, now=timezone.now())
    return moves
