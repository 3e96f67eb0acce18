"""Campaign state changes driven by its enrollments, shared by the sending engine
(after a batch, after recovering lost claims) and intake (a reply, unsubscribe,
complaint or bounce that ends an enrollment)."""

from datetime import datetime

from django.db.models import Exists, OuterRef

from outreach.models.campaigns import Campaign
from outreach.models.sending import Enrollment


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
