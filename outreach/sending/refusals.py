"""A temporary refusal (4xx) or a broken connection: the step retried on
SENDING_RETRY_SCHEDULE until its series ends (docs/sending.md, "Retries"), and a 4.7.x
refusal counted by the circuit breaker (outreach.sending.breaker)."""

from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Min

from outreach.bounce_types import SOFT, BounceClass
from outreach.enrollments import enrollments_fail
from outreach.models.sending import Enrollment, SendClaim
from outreach.sending.attempts import AttemptOutcome, Outcome, attempt_finish
from outreach.sending.bounces import enrollment_mark_bounced
from outreach.sending.breaker import strike_from_reply
from outreach.sending.record import reservations_release, retry_delay


def temporary_record(
    *, claim: SendClaim, enrollment: Enrollment, attempt: AttemptOutcome, now
) -> datetime | None:
    """A 4xx or a broken connection (`attempt`, deferred): retried after
    SENDING_RETRY_SCHEDULE (the time returned), until the series ends (None, as when the
    claim was no longer open): after SENDING_MAX_ATTEMPTS attempts, or, for a server's
    4xx refusal, once no retry fits within SOFT_BOUNCE_MAX_HOURS of the step's first
    attempt. A series ended by a refusal bounces `soft` (`expired`); one ended by a
    connection failure is failed. A 4.7.x refusal is a strike for the circuit breaker
    (outreach.sending.breaker)."""
    attempts = enrollment.send_attempts + 1
    refused = attempt.code is not None and 400 <= attempt.code < 500
    with transaction.atomic():
        if not attempt_finish(claim, attempt, now=now):
            return None
        reservations_release(claim, now=now, next_send_at=None)
        if refused:
            strike_from_reply(
                credential_id=claim.credential_id,
                email=enrollment.contact.email,
                code=attempt.code,
                text=attempt.text,
                at=now,
            )
        rows = Enrollment.objects.filter(pk=enrollment.pk, status__in=Enrollment.DUE_STATUSES)
        retry_at = now + retry_delay(attempts)
        expired = refused and _series_expired(claim, attempts=attempts, retry_at=retry_at)
        if expired:
            # Still due (no reply or unsubscribe meanwhile): the series ends in a bounce.
            if not rows.update(send_attempts=attempts, updated_at=now):
                return None
            enrollment.send_attempts = attempts
            enrollment_mark_bounced(
                enrollment=enrollment,
                reason=f"{EXPIRED_STATUS} {expired}; last reply: {attempt.text}",
                at=now,
                credential=claim.credential,
                rejected_at_send=True,
                # `expired` whatever the last refusal's words said (a full mailbox, a
                # rate limit): the series ended, the address was never refused for good.
                bounce_class=BounceClass(SOFT, "expired"),
            )
            return None
        if attempts >= settings.SENDING_MAX_ATTEMPTS:
            enrollments_fail(rows, error=attempt.text, now=now, send_attempts=attempts)
            return None
        rows.update(
            next_send_at=retry_at,
            send_attempts=attempts,
            last_error=attempt.text,
            updated_at=now,
        )
        return retry_at


# RFC 3463's "delivery time expired": the bounce reason a series of refusals ends with.
EXPIRED_STATUS = "4.4.7"


def _series_expired(claim: SendClaim, *, attempts: int, retry_at: datetime) -> str:
    """Why the step's series of temporary refusals ends with this attempt ("" while it
    goes on): SENDING_MAX_ATTEMPTS reached, or the next try would come later than
    SOFT_BOUNCE_MAX_HOURS after the step's first attempt."""
    if attempts >= settings.SENDING_MAX_ATTEMPTS:
        return f"Delivery expired after {attempts} attempts"
    first = SendClaim.objects.filter(
        enrollment_id=claim.enrollment_id, step=claim.step, outcome=Outcome.DEFERRED
    ).aggregate(first=Min("claimed_at"))["first"]
    hours = settings.SOFT_BOUNCE_MAX_HOURS
    if first is not None and retry_at > first + timedelta(hours=hours):
        return f"Delivery expired after {attempts} attempts over {hours:g} hours"
    return ""
