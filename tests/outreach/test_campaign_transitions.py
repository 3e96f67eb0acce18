"""Every change of a campaign's status goes through outreach.campaigns.state: each
transition moves only campaigns in the statuses it leaves, and emits its event once."""

import ast
from datetime import UTC, datetime

import pytest

from config.api.errors import ValidationFailed
from outreach.campaigns.state import (
    campaign_activate,
    campaign_pause,
    campaign_resume,
    campaigns_complete_if_done,
    campaigns_pause_if_unsendable,
)
from outreach.errors import CampaignNotDispatchable
from outreach.models.campaigns import Campaign
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Enrollment
from tests.outreach.factories import CampaignFactory, ContactFactory, EnrollmentFactory
from tests.support.status_writes import ROOT, StatusScan
from webhooks.models import Event

pytestmark = pytest.mark.django_db

OWNER = "campaigns/state.py"
AT = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
# A pause's reason and time are written only with its status.
SCAN = StatusScan(
    model="Campaign",
    table="outreach_campaign",
    fields=frozenset({"status", "paused_reason", "paused_at"}),
    enums=frozenset({"Status", "PausedReason"}),
    any_value=frozenset({"paused_reason"}),
)


def test_only_the_state_module_writes_a_campaign_status():
    assert SCAN.outside(owners=(OWNER,)) == {}


def test_the_scan_finds_each_shape_of_status_write():
    source = """
campaign.status = Campaign.Status.ACTIVE
rows.update(status=Campaign.Status.PAUSED)
changes = {"status": Campaign.Status.COMPLETED}
Campaign(status=Campaign.Status.DRAFT)
rows.update(paused_reason="")
SQL = "UPDATE outreach_campaign SET status = 'active'"
rows.filter(status=Campaign.Status.ACTIVE)  # a read
enrollment.status = Enrollment.Status.SENT  # not a campaign
SmtpCredential.objects.filter(pk=pk).update(paused_reason="")  # a mailbox's pause
Campaign.objects.filter(pk=pk).update(paused_reason="")
"""
    assert SCAN.lines(source) == [2, 3, 4, 5, 6, 7, 11]


def test_the_owner_is_where_the_scan_finds_the_writes():
    """The scan sees the write of each transition in the owner: it is not blind."""
    source = (ROOT / "outreach" / OWNER).read_text()
    tree = ast.parse(source)
    writes = set(SCAN.lines(source))
    writers = {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
        and writes & set(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    }
    assert writers == {
        "campaign_activate",
        "campaign_pause",
        "campaign_resume",
        "campaigns_pause_if_unsendable",
        "campaigns_complete_if_done",
    }


def _campaign(status: str, **kwargs) -> Campaign:
    return CampaignFactory(status=status, **kwargs)


def _statuses(*campaigns: Campaign) -> list[str]:
    for campaign in campaigns:
        campaign.refresh_from_db()
    return [campaign.status for campaign in campaigns]


def test_activate_moves_a_draft_or_completed_campaign_only():
    campaigns = [_campaign(s) for s in ("draft", "completed", "paused", "active")]
    moved = [campaign_activate(campaign=c, at=AT) for c in campaigns]
    assert moved == [True, True, False, False]
    assert _statuses(*campaigns) == ["active", "active", "paused", "active"]
    assert campaigns[0].updated_at == AT


def test_activate_changes_nothing_when_the_row_moved_since_it_was_read():
    campaign = _campaign("draft")
    Campaign.objects.filter(pk=campaign.pk).update(status="paused")
    assert not campaign_activate(campaign=campaign, at=AT)
    assert campaign.status == "draft"  # the instance is not told a lie
    assert _statuses(campaign) == ["paused"]


@pytest.mark.parametrize("status", ["draft", "completed"])
def test_pause_and_resume_refuse_what_is_neither_active_nor_paused(status):
    campaign = _campaign(status)
    with pytest.raises(ValidationFailed):
        campaign_pause(campaign=campaign)
    with pytest.raises(ValidationFailed):
        campaign_resume(campaign=campaign)
    assert _statuses(campaign) == [status]


def test_pause_then_resume():
    campaign = _campaign("active")
    assert campaign_pause(campaign=campaign).paused_reason == "manual"
    assert campaign_pause(campaign=campaign).status == "paused"  # again: nothing
    resumed = campaign_resume(campaign=campaign)
    assert (resumed.status, resumed.paused_reason, resumed.paused_at) == ("active", "", None)
    assert Event.objects.count() == 0  # a pause by hand is not an event


def test_a_pause_that_lost_the_race_says_what_the_campaign_is_now():
    campaign = _campaign("active")
    Campaign.objects.filter(pk=campaign.pk).update(status="completed")
    with pytest.raises(ValidationFailed) as raised:
        campaign_pause(campaign=campaign)
    assert raised.value.details == {"fields": {"status": ["The campaign is now completed."]}}


def test_resume_needs_an_enabled_mailbox():
    campaign = _campaign("paused")
    SmtpCredential.objects.update(disabled_at=AT)
    with pytest.raises(CampaignNotDispatchable):
        campaign_resume(campaign=campaign)
    assert _statuses(campaign) == ["paused"]


def test_the_pause_for_want_of_a_mailbox_takes_active_campaigns_once():
    without = _campaign("active", with_credential=False)
    paused = _campaign("paused", with_credential=False)
    sendable = _campaign("active")
    ids = [without.pk, paused.pk, sendable.pk]
    assert campaigns_pause_if_unsendable(campaign_ids=ids, at=AT) == [without]
    assert campaigns_pause_if_unsendable(campaign_ids=ids, at=AT) == []
    assert _statuses(without, paused, sendable) == ["paused", "paused", "active"]
    assert (without.paused_reason, without.paused_at) == ("all_credentials_disabled", AT)
    assert [e.data for e in Event.objects.filter(type="campaign.paused")] == [
        {"campaign_id": str(without.pk), "name": without.name, "reason": "all_credentials_disabled"}
    ]


def test_completion_takes_active_campaigns_without_an_active_enrollment():
    done, busy, paused = (_campaign(s) for s in ("active", "active", "paused"))
    for campaign, status in ((done, "replied"), (busy, "scheduled"), (paused, "completed")):
        EnrollmentFactory(
            campaign=campaign, contact=ContactFactory(account=campaign.account), status=status
        )
    ids = [done.pk, busy.pk, paused.pk]
    assert campaigns_complete_if_done(campaign_ids=ids, at=AT) == 1
    assert campaigns_complete_if_done(campaign_ids=ids, at=AT) == 0
    assert _statuses(done, busy, paused) == ["completed", "active", "paused"]
    assert Enrollment.objects.filter(campaign=done).get().status == "replied"
