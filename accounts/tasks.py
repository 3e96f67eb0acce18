from celery import shared_task

from accounts.ratelimit import rate_limit_buckets_prune as _rate_limit_buckets_prune
from accounts.services import idempotency_records_prune


@shared_task(name="accounts.tasks.idempotency_prune")
def idempotency_prune() -> int:
    """Hourly (beat): delete Idempotency-Key records older than 24 hours."""
    return idempotency_records_prune()


@shared_task(name="accounts.tasks.rate_limit_buckets_prune")
def rate_limit_buckets_prune() -> int:
    """Hourly (beat): delete spent SQL rate-limit buckets (embedded mode)."""
    return _rate_limit_buckets_prune()
