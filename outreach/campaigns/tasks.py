"""Celery tasks of campaigns: the follow-up rules of completed enrollments
(outreach.campaigns.followups), fired after the completion's commit and swept by beat."""

from celery import shared_task
from django.utils import timezone

from outreach.campaigns.followups import complete_rule_fire, followups_sweep


@shared_task(name="outreach.tasks.followups_complete", acks_late=True, ignore_result=True)
def followups_complete(enrollment_ids: list[str]) -> int:
    """Fire the on_complete rule of enrollments just completed. Safe to run twice: a
    rule fires once per enrollment. Returns how many fired."""
    now = timezone.now()
    fired = 0
    for enrollment_id in enrollment_ids:
        result = complete_rule_fire(enrollment_id=enrollment_id, now=now)
        fired += bool(result and result.new)
    return fired


@shared_task(name="outreach.tasks.followups_sweep", ignore_result=True)
def followups_sweep_task() -> int:
    """Beat (FOLLOWUPS_SWEEP_INTERVAL_SECONDS): the on_complete rules whose task was
    lost, fired. Returns how many fired."""
    return followups_sweep(now=timezone.now())
