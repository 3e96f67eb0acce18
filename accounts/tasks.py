import logging
import smtplib
import uuid

from celery import shared_task
from django.db import transaction

from accounts.audit import audit_events_prune as _audit_events_prune
from accounts.models import Account
from accounts.ratelimit import rate_limit_buckets_prune as _rate_limit_buckets_prune
from accounts.services import idempotency_records_prune
from accounts.verification import email_verification_send

logger = logging.getLogger(__name__)

# Seconds before the verification email's second and third attempts after a mail server
# failure. Short: held by the worker (an ETA), not the database; then the account asks for
# a new link.
VERIFICATION_EMAIL_RETRY_DELAYS = (60, 300)


@shared_task(name="accounts.tasks.idempotency_prune")
def idempotency_prune() -> int:
    """Hourly (beat): delete Idempotency-Key records older than 24 hours."""
    return idempotency_records_prune()


@shared_task(name="accounts.tasks.rate_limit_buckets_prune")
def rate_limit_buckets_prune() -> int:
    """Hourly (beat): delete spent SQL rate-limit buckets (embedded mode)."""
    return _rate_limit_buckets_prune()


@shared_task(name="accounts.tasks.audit_events_prune")
def audit_events_prune() -> int:
    """Daily (beat): delete audit events older than AUDIT_RETENTION_DAYS, in batches."""
    return _audit_events_prune()


@shared_task(name="accounts.tasks.verification_email_send")
def verification_email_send(account_id: str, attempt: int = 1) -> bool:
    """Email an account the link that proves its signup address (accounts.verification).
    A mail server that fails is tried twice more (VERIFICATION_EMAIL_RETRY_DELAYS); then
    the failure is logged and the account asks for a new link (POST /signup/verification)."""
    account = Account.objects.filter(pk=uuid.UUID(account_id)).first()
    if account is None:
        return False
    try:
        return email_verification_send(account=account)
    except (smtplib.SMTPException, OSError) as exc:
        if attempt > len(VERIFICATION_EMAIL_RETRY_DELAYS):
            logger.warning(
                "verification email not sent account=%s after %d attempts: %s",
                account_id,
                attempt,
                exc,
            )
            return False
        logger.info("verification email attempt %d failed account=%s: %s", attempt, account_id, exc)
        verification_email_send.apply_async(
            args=[account_id, attempt + 1], countdown=VERIFICATION_EMAIL_RETRY_DELAYS[attempt - 1]
        )
        return False


def verification_email_queue(*, account: Account) -> None:
    """Send the account its link from a worker once the current transaction commits. A
    broker that cannot be reached is logged, never raised: the account asks again."""
    account_id = str(account.pk)
    transaction.on_commit(lambda: verification_email_send.delay(account_id), robust=True)
