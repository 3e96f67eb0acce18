"""Beat task of approvals: their expiry."""

from celery import shared_task

from outreach.approvals.services import approvals_expire


@shared_task(name="outreach.tasks.approvals_expire", ignore_result=True)
def approvals_expire_task() -> int:
    """Beat, every minute: pending approvals past APPROVAL_TTL_HOURS expire."""
    return approvals_expire()
