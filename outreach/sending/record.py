"""Recording a send's outcome: sent, retried (outreach.sending.refusals), undeliverable, bounced, interrupted, the
mailbox's failure. Each finishes the claim's row as the record of its SMTP attempt
(`attempt_finish`; a sent one in its one statement, outreach.sending.record_sql) in the
transaction that records the outcome; the enrollment's or the
mailbox's `last_error` is that attempt's text (`AttemptOutcome.text`)."""

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models.functions import Now

from billing.periods import period_bounds
from billing.usage import usage_record_current
from config.crypto import secrets_deferred
from config.retry import schedule_delay
from outreach.campaigns.branch_moves import branch_recheck_on_commit, sent_move
from outreach.campaigns.followups import completed_followups_enqueue
from outreach.campaigns.variants import stored_letter
from outreach.domain_cap.counts import counts_release
from outreach.enrollments import enrollments_fail
from outreach.enrollments.branching import Move, decisions_record
from outreach.events import ENROLLMENT_SENT, enrollment_event_data
from outreach.mailboxes.pace import reservation_release
from outreach.models.campaigns import Campaign, CampaignStep
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Enrollment, SendClaim
from outreach.sending import record_sql
from outreach.sending.attempts import AttemptOutcome, Outcome, attempt_finish
from outreach.sending.bounces import enrollment_mark_bounced
from outreach.sending.message import Outgoing
from webhooks.events import drains_publish_on_commit

logger = logging.getLogger(__name__)


# --- recording outcomes ---------------------------------------------------------------------


def retry_delay(attempts_done: int) -> timedelta:
    return timedelta(
        seconds=schedule_delay(settings.SENDING_RETRY_SCHEDULE, attempts_done, fallback=[300])
    )


def claim_release(claim: SendClaim, *, now: datetime, next_send_at: datetime | None) -> None:
    """Give back a claim that made no attempt (no SMTP command was sent for it), and its
    reservation; a still-due enrollment is due at `next_send_at`. None, or a time not
    after `now` (due again at once), leaves its next_send_at alone: a claim never moves
    its enrollment, so it is due already, in its place in line (or wherever intake
    moved it meanwhile, e.g. an out-of-office's postponement)."""
    with transaction.atomic():
        if SendClaim.objects.open().filter(pk=claim.pk).delete()[0]:
            reservations_release(claim, now=now, next_send_at=next_send_at)


def reservations_release(claim: SendClaim, *, now: datetime, next_send_at) -> None:
    """The claim's units of the mailbox's day and of the recipient domain's, given back;
    its still-due enrollment due at `next_send_at` (None, or not after `now`: left
    alone, as claim_release says)."""
    if claim.credential_id is not None:
        reservation_release(credential_id=claim.credential_id, at=claim.claimed_at)
    counts_release([claim.domain_count_id])
    if next_send_at is not None and next_send_at > now:
        Enrollment.objects.filter(
            pk=claim.enrollment_id, status__in=Enrollment.DUE_STATUSES
        ).update(next_send_at=next_send_at, updated_at=now)


@dataclass
class _Sent:
    """One accepted message to record, and the enrollment's move it makes."""

    claim: SendClaim
    enrollment: Enrollment
    campaign: Campaign
    credential: SmtpCredential
    outgoing: Outgoing
    now: datetime
    reply_seen: bool
    attempt: AttemptOutcome
    move: Move  # outreach.campaigns.branch_moves.sent_move
    columns: dict  # the enrollment's columns after the move (Move.columns)
    # The claim drew the mailbox's gap from the claim's time; a send that left late must
    # still keep the minimum before the next one.
    pace_floor: datetime | None
    metered: bool = True  # counted in the period's usage: never a simulator's send


def sent_record(
    *,
    claim: SendClaim,
    enrollment: Enrollment,
    campaign: Campaign,
    credential: SmtpCredential,
    steps: dict[int, CampaignStep],
    outgoing: Outgoing,
    now: datetime,
    reply_seen: bool = True,
    accepted_at: datetime | None = None,
    reply: tuple[int, str] | None = None,
    duration_ms: int | None = None,
    finished_at: datetime | None = None,
) -> bool:
    """An accepted message (or one whose reply never came, `reply_seen=False`), in one
    transaction: the Message, the attempt finished, the enrollment moved on, the
    counters, the period's usage and `enrollment.sent`. `accepted_at` (default `now`,
    the send's start) is when the server took the message, or when its reply was given
    up on: a paced mailbox's next send is at least min_interval_seconds after it, as the
    server sees them. `reply`: the server's (code, text) to the end of DATA.
    `finished_at` (default `accepted_at`) ends the attempt's record: a lost worker's
    attempt ends when its recovery gave it up, while its pace still counts from the
    send. False when nothing was recorded: the claim had been recovered meanwhile, and
    the recovery recorded the send (and counted it)."""
    move = sent_move(
        position=claim.step, enrollment=enrollment, campaign=campaign, steps=steps, now=now
    )
    attempt = AttemptOutcome.sent(reply_seen, reply, duration_ms, finished_at or accepted_at or now)
    sent = _Sent(
        claim=claim,
        enrollment=enrollment,
        campaign=campaign,
        credential=credential,
        outgoing=outgoing,
        now=now,
        reply_seen=reply_seen,
        attempt=attempt,
        move=move,
        columns=move.columns(),
        metered=not credential.is_simulator,  # it never leaves (docs/sandbox.md)
        pace_floor=(
            (accepted_at or now) + timedelta(seconds=credential.min_interval_seconds)
            if credential.is_paced
            else None
        ),
    )
    if not _sent_statement(sent):
        return False
    if move.waiting and move.current_key is not None:
        branch_recheck_on_commit(enrollment_id=enrollment.pk, branch_key=move.current_key)
    if move.status == Enrollment.Status.COMPLETED:  # its on_complete rule, if any
        completed_followups_enqueue(campaign=campaign, enrollment_ids=[enrollment.pk])
    return True


def _sent_moved(sent: _Sent) -> None:
    """The enrollment in memory as the record moved it (the event reads it)."""
    enrollment = sent.enrollment
    for name, value in sent.columns.items():
        setattr(enrollment, name, value)
    enrollment.current_step, enrollment.sent_at = sent.claim.step, sent.now
    enrollment.last_step = sent.claim.step
    enrollment.credential_id = sent.credential.pk
    enrollment.campaign = sent.campaign


def _sent_statement(sent: _Sent) -> bool:
    """The record: the one statement (outreach.sending.record_sql), run again after
    making what it lacked: the period's usage record, or the enrollment read under its
    row lock when it was not due any more (or the move decided branches, which are
    recorded first). False when the claim was not open any more and nothing was
    recorded: its worker was cut off past the lease, and the scheduler's recovery
    recorded the send meanwhile (docs/sending.md)."""
    locked = bool(sent.move.decisions)
    # At most: the period's record made, then the enrollment read again.
    for _ in range(3):
        if locked:
            missing = _sent_locked(sent)
        else:
            _sent_moved(sent)
            missing = _sent_run(sent, moves=True)
        if missing is None:
            return True
        if missing == record_sql.CLAIM:
            logger.warning(
                "enrollment %s: its claim was recovered while this worker was away; "
                "the send is recorded once, by the recovery",
                sent.enrollment.pk,
            )
            return False
        if missing == record_sql.USAGE:
            usage_record_current(account=sent.campaign.account, at=sent.now)
        locked = locked or missing == record_sql.MOVED
    raise RuntimeError(f"the record of enrollment {sent.enrollment.pk}'s send did not apply")


def _sent_locked(sent: _Sent) -> str | None:
    """The statement in a transaction that holds the claim's row, then the enrollment's
    (the recovery's lock order): a due enrollment moves and its branch decisions are
    recorded before the statement (their counts' place in the lock order,
    outreach.enrollments.stats); one intake changed is left as it is, its event carries
    its state as read. What the statement lacked, or None."""
    with transaction.atomic():
        if not SendClaim.objects.open().select_for_update().filter(pk=sent.claim.pk).exists():
            return record_sql.CLAIM
        due = (
            Enrollment.objects.select_for_update(of=("self",), no_key=True)
            .filter(pk=sent.enrollment.pk, status__in=Enrollment.DUE_STATUSES)
            .exists()
        )
        if due:
            _sent_moved(sent)
            decisions_record(sent.enrollment, sent.move.decisions, at=sent.now)
        else:
            sent.enrollment.refresh_from_db()
            sent.enrollment.campaign = sent.campaign
        missing = _sent_run(sent, moves=due)
        if missing is not None:
            transaction.set_rollback(True)
    return missing


def _sent_run(sent: _Sent, *, moves: bool) -> str | None:
    """The one statement (outreach.sending.record_sql), the enrollment moved by it
    (`moves`: in memory already, as the event reads it) or not. What it lacked, or None."""
    campaign, outgoing, now = sent.campaign, sent.outgoing, sent.now
    rung = record_sql.record_sent(
        claim_id=sent.claim.pk,
        attempt=sent.attempt,
        account_id=campaign.account_id,
        campaign_id=campaign.pk,
        credential_id=sent.credential.pk,
        enrollment_id=sent.enrollment.pk,
        step=sent.claim.step,
        message_id=outgoing.message_id,
        to_email=outgoing.to_email,
        subject=outgoing.subject,
        text=outgoing.text,
        variant=outgoing.variant,
        now=now,
        reply_seen=sent.reply_seen,
        moves=moves,
        move=sent.columns,
        keys=sent.move.path,
        note="" if sent.reply_seen else sent.attempt.text,
        pace_floor=sent.pace_floor,
        metered=sent.metered,
        period=period_bounds(campaign.account, now),
        event_type=ENROLLMENT_SENT,
        event_data=enrollment_event_data(sent.enrollment, event_type=ENROLLMENT_SENT),
    )
    if isinstance(rung, record_sql.Missing):
        return rung.what
    drains_publish_on_commit(rung)
    return None


def undeliverable_record(*, claim: SendClaim, enrollment, attempt: AttemptOutcome, now) -> None:
    """No retry can help (the message cannot be built, or its address cannot be
    expressed to this server): failed."""
    with transaction.atomic():
        if attempt_finish(claim, attempt, now=now):
            reservations_release(claim, now=now, next_send_at=None)
            enrollments_fail(
                Enrollment.objects.filter(pk=enrollment.pk), error=attempt.text, now=now
            )


def bounce_record(
    *, claim: SendClaim, enrollment, credential, attempt: AttemptOutcome, now
) -> None:
    """A 5xx to RCPT TO or DATA: a bounce (outreach.sending.bounces)."""
    with transaction.atomic():
        attempt_finish(claim, attempt, now=now)
        # The reservation stays used: the server judged an attempt from this mailbox.
        enrollment_mark_bounced(
            enrollment=enrollment,
            reason=attempt.text,
            at=now,
            credential=credential,
            rejected_at_send=True,
        )


def credential_error_record(
    *,
    credential: SmtpCredential,
    attempt: AttemptOutcome,
    now: datetime,
    claim: SendClaim | None = None,
    retry_at: datetime | None = None,
) -> None:
    """The mailbox failed: its last_error is the attempt's text. With `claim` (the claim
    the failure came on: authentication, TLS, MAIL FROM refused), its attempt is
    finished as the mailbox's failure, its reservation given back and its enrollment
    due again at `retry_at`, no attempt counted against the enrollment."""
    with transaction.atomic():
        SmtpCredential.objects.filter(pk=credential.pk).update(
            last_error=attempt.text, last_error_at=now
        )
        if claim is not None and attempt_finish(claim, attempt, now=now):
            reservations_release(claim, now=now, next_send_at=retry_at)
    credential.last_error, credential.last_error_at = attempt.text, now


def claims_interrupted_record(*, claims: list[SendClaim], now: datetime) -> int:
    """Claims marked started whose worker was lost (their lease lapsed): the message
    may have reached the server. Each is recorded as sent when it started, as it was
    built, with its reply unseen: the sequence goes on, and the step is never sent
    again. Its attempt ends `now`, when the recovery gave it up. Claims
    started before their message was kept (none since this field exists) end failed,
    as they used to. Returns how many were recorded as sent."""
    recorded = 0
    legacy = [c for c in claims if not c.message_id]
    if legacy:
        enrollments_fail(
            Enrollment.objects.filter(pk__in=[c.enrollment_id for c in legacy]),
            error=INTERRUPTED_ERROR,
            now=None,
        )
        SendClaim.objects.open().filter(pk__in=[c.pk for c in legacy]).update(
            finished_at=Now(), outcome=Outcome.FAILED, reply_text=INTERRUPTED_ERROR
        )
    claims = [c for c in claims if c.message_id]
    if not claims:
        return 0
    enrollments = Enrollment.objects.select_related("contact").in_bulk(
        [c.enrollment_id for c in claims]
    )
    campaign_ids = {e.campaign_id for e in enrollments.values()}
    campaigns = Campaign.objects.select_related("account").in_bulk(campaign_ids)
    steps: dict = {cid: {} for cid in campaign_ids}
    for step in CampaignStep.objects.filter(campaign_id__in=campaign_ids):
        steps[step.campaign_id][step.position] = step
    # No secret: nothing is sent here.
    credentials = secrets_deferred(SmtpCredential.objects.all()).in_bulk(
        {c.credential_id for c in claims}
    )
    for claim in claims:
        assert claim.sending_at is not None  # started claims only
        enrollment = enrollments[claim.enrollment_id]
        campaign = campaigns[enrollment.campaign_id]
        sent_record(
            claim=claim,
            enrollment=enrollment,
            campaign=campaign,
            credential=credentials[claim.credential_id],
            steps=steps[campaign.pk],
            outgoing=Outgoing(
                message_id=claim.message_id,
                subject=claim.subject,
                data=b"",
                to_email=claim.to_email,
                variant=stored_letter(enrollment, claim.step),
                text=claim.text,
            ),
            now=claim.sending_at,
            reply_seen=False,
            finished_at=now,
        )
        recorded += 1
    logger.warning(
        "%d sends interrupted by a lost worker: recorded as sent, reply unseen", recorded
    )
    return recorded


# Claims started before a claim kept its message (older releases) still end failed.
INTERRUPTED_ERROR = (
    "The worker was lost while the SMTP server had this message; whether it was "
    "accepted is unknown, so it is not sent again (it could arrive twice)."
)
