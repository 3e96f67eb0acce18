"""Due enrollments of blocked contacts end `stopped` (`blocked`): the send scheduler's
check before each step (outreach.sending.scheduler)."""

from collections import defaultdict
from datetime import datetime

from outreach.campaigns.state import campaigns_complete_if_done
from outreach.enrollments import enrollments_stop
from outreach.models.sending import Enrollment


def blocked_stop(*, enrollments: list[Enrollment], at: datetime) -> None:
    """Stop `enrollments` (locked by the caller), counted per campaign; a campaign left
    without an active enrollment completes. No event: the contact did nothing."""
    by_campaign = defaultdict(list)
    for enrollment in enrollments:
        by_campaign[enrollment.campaign_id].append(enrollment.pk)
    for campaign_id, ids in by_campaign.items():
        enrollments_stop(
            Enrollment.objects.filter(pk__in=ids),
            campaign_id=campaign_id,
            reason=Enrollment.StopReason.BLOCKED,
            at=at,
        )
    campaigns_complete_if_done(campaign_ids=set(by_campaign), at=at)
