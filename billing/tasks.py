"""Celery tasks (beat): billing housekeeping. Each calls a service."""

from celery import shared_task

from billing import psp, psp_events, reconcile


@shared_task(name="billing.tasks.psp_events_prune")
def psp_events_prune() -> int:
    """Daily (beat): forget payment provider events past PSP_EVENT_RETENTION_DAYS."""
    return psp_events.psp_events_prune()


@shared_task(name="billing.tasks.subscriptions_reconcile")
def subscriptions_reconcile() -> dict[str, int]:
    """Daily (beat): re-read every subscription from Stripe (billing_reconcile's work).
    Nothing to do while the payment provider is not configured."""
    if not psp.psp_configured():
        return {"checked": 0, "changed": 0, "failed": 0}
    result = reconcile.subscriptions_reconcile()
    return {"checked": result.checked, "changed": result.changed, "failed": result.failed}
