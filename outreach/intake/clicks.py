"""The click of a tracked link (GET /t/c/<token>, docs/deliverability.md): the first
click of an enrollment is recorded, counted and announced; later ones only redirect."""

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from outreach.campaigns.clicks import ClickTarget
from outreach.enrollments import count, counting, variant_count
from outreach.events import enrollment_clicked_emit
from outreach.models.sending import Enrollment


def enrollment_mark_clicked(*, target: ClickTarget, at: datetime | None = None) -> bool:
    """Record the enrollment's first click: `clicked_at`, the step and variant of the
    link's message (`clicked_on`), the campaign's and that variant's `clicked` count,
    and the opt-in event enrollment.clicked, in one transaction.

    A repeat click is one UPDATE that matches no row. Returns whether this call was the
    first click (False too when the enrollment no longer exists).
    """
    at = at or timezone.now()
    # Outside any transaction (the redirect view): BEGIN/UPDATE/COMMIT for a repeat click.
    with transaction.atomic(savepoint=False), counting():
        first = Enrollment.objects.filter(pk=target.enrollment_id, clicked_at__isnull=True).update(
            clicked_at=at, clicked_on=f"{target.step}{target.variant}", updated_at=at
        )
        if not first:
            return False
        enrollment = Enrollment.objects.select_related("contact", "campaign").get(
            pk=target.enrollment_id
        )
        enrollment_clicked_emit(enrollment=enrollment, url=target.url)
        count(enrollment.campaign_id, clicked=1)
        variant_count(enrollment.campaign_id, target.step, target.variant, clicked=1)
    return True
