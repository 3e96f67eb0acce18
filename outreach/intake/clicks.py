"""The click of a tracked link (GET /t/c/<token>, docs/deliverability.md): the first
click of an enrollment is recorded, counted and announced; the first click of each
message is recorded on it (API.md 17), and may decide a branch the enrollment waits
at; later ones only redirect."""

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from outreach.analytics import Hit, hits_add
from outreach.campaigns.branch_moves import branch_event
from outreach.campaigns.clicks import ClickTarget
from outreach.enrollments import count, counting, variant_count
from outreach.enrollments.clicks import click_record
from outreach.events import enrollment_clicked_emit
from outreach.models.sending import Enrollment


def enrollment_mark_clicked(*, target: ClickTarget, at: datetime | None = None) -> bool:
    """Record the enrollment's first click: `clicked_at`, the step and variant of the
    link's message (`clicked_on`), the campaign's and that variant's `clicked` count,
    and the opt-in event enrollment.clicked, in one transaction; with them, the first
    click of the link's message (Message.clicked_at), which moves an enrollment waiting
    at a branch on clicks of it to its `then` in the same transaction.

    A repeat click is one statement that changes nothing. Returns whether this call was
    the first click of the enrollment (False too when it no longer exists).
    """
    at = at or timezone.now()
    # Outside any transaction (the redirect view): BEGIN/statement/COMMIT for a repeat.
    with transaction.atomic(savepoint=False), counting():
        click = click_record(
            enrollment_id=target.enrollment_id, step=target.step, variant=target.variant, at=at
        )
        if click.message_id is not None:
            # Written when counting() ends, after the stats: the rows' lock order.
            hits_add([Hit("clicked", target.enrollment_id, at, message_id=click.message_id)])
        if click.first:
            enrollment = Enrollment.objects.select_related("contact", "campaign").get(
                pk=target.enrollment_id
            )
            enrollment_clicked_emit(enrollment=enrollment, url=target.url)
            count(enrollment.campaign_id, clicked=1)
            variant_count(enrollment.campaign_id, target.step, target.variant, clicked=1)
        if click.step_key is not None and click.waiting_key is not None:
            branch_event(
                enrollment_id=target.enrollment_id,
                branch_key=click.waiting_key,
                kind="clicked",
                step_key=click.step_key,
                at=at,
            )
    return click.first
