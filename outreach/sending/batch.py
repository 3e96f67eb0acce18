"""SMTP delivery of claimed batches: one connection per batch, one mailbox per batch.

For each claim of the batch, in order:
1. mark it started (`SendClaim.sending_at`) with a conditional UPDATE that also checks
   the enrollment is still due, its contact not suppressed and its campaign active --
   otherwise the claim is given back and nothing is sent;
2. run the SMTP transaction (MAIL, RCPT, DATA) on the batch's connection;
3. record the outcome in one transaction, the claim finished as the record of its
   attempt (outcome, the server's reply, duration):
   - accepted: Message row (its Message-ID), enrollment state (sent, or completed after
     the last step; the next step scheduled by outreach.campaigns.windows.step_send_at), the
     mailbox's counters, the per-campaign send count, the period's usage +1 (billing)
     and `enrollment.sent`;
   - 5xx on RCPT or DATA: a permanent bounce (outreach.sending.bounces.enrollment_mark_bounced);
   - 4xx, or the connection broke: the step is retried after SENDING_RETRY_SCHEDULE;
     after SENDING_MAX_ATTEMPTS temporary failures the enrollment is failed;
   - the mailbox itself failed (authentication, STARTTLS, MAIL FROM refused): recorded
     on the credential (last_error, last_error_at) and the whole rest of the batch is
     retried after SENDING_CREDENTIAL_RETRY_SECONDS; never a bounce, no attempt counted.

A message the server accepted is recorded before the next one is sent, so a worker that
dies mid-batch leaves at most the one message in flight undecided (docs/sending.md).
The plan limit is not checked here: sends already scheduled still fire (a soft cap).
"""

import contextlib
import logging
import smtplib
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from uuid import UUID

from django.conf import settings
from django.utils import timezone

from config.db import connection_release
from config.metrics import send_observe, smtp_sessions
from config.worker import stopping
from outreach.emails import SIMULATOR_DOMAIN
from outreach.enrollments.branching import leads_to_email
from outreach.mailboxes.secrets import secrets_hidden
from outreach.mailboxes.smtp import smtp_close, smtp_connect
from outreach.models.campaigns import CampaignStep
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Message, SendClaim
from outreach.sending.attempts import BatchResult
from outreach.sending.breaker import held_until, pauses_of, strike_reason
from outreach.sending.message import Outgoing, first_subject, message_build
from outreach.sending.record import (
    AttemptOutcome,
    Outcome,
    bounce_record,
    claim_release,
    credential_error_record,
    sent_record,
    undeliverable_record,
)
from outreach.sending.record_sql import mark_started
from outreach.sending.refusals import temporary_record
from outreach.sending.simulator import SIMULATOR_ADDRESS_REFUSED, SimulatedSMTP, outcome_on_commit
from outreach.sending.smtp import (
    ERROR_MAX_CHARS,
    MailboxError,
    OutcomeUnknown,
    PermanentError,
    TemporaryError,
    smtp_error_classify,
    smtp_transaction,
)

logger = logging.getLogger(__name__)


# A batch stops taking new messages this long before its claims' lease ends (60 s, or a
# quarter of a shorter lease), so no message is in flight when the scheduler may reclaim.
LEASE_MARGIN_SECONDS = 60


# Which count of BatchResult each outcome of config.metrics.SEND_OUTCOMES adds to.
_RESULT_FIELDS = {
    "accepted": "sent",
    "unknown": "sent",
    "bounced": "bounced",
    "deferred": "retried",
    "failed": "failed",
}


@dataclass
class MailboxBatch:
    """One mailbox's claims, in order, with what they need, loaded with the other
    mailboxes' of the same task, and what carries from one claim to the next: the SMTP
    connection (opened at the first message, reopened after it broke) and the counts."""

    claims: list[SendClaim]
    credential: SmtpCredential
    steps: dict[UUID, dict[int, CampaignStep]]  # campaign -> position -> step
    variants: dict[UUID, str]  # enrollment -> variant letter
    threads: dict[UUID, list[Message]]  # a reply's enrollment -> its earlier messages
    result: BatchResult = field(default_factory=BatchResult)
    conn: smtplib.SMTP | None = None
    clock: Callable[[], datetime] = timezone.now
    # Campaigns of which a message of this batch may have ended an enrollment.
    ended: set[UUID] = field(default_factory=set)
    held: dict[str, datetime] = field(default_factory=dict)  # paused providers (breaker)
    simulated: bool = field(init=False)  # the transport, decided once (docs/sandbox.md)

    def __post_init__(self) -> None:
        # The simulator's answers in memory (outreach.sending.simulator), or the server's.
        self.simulated = self.credential.is_simulator

    def run(self) -> BatchResult:
        """Send the claims in order over one connection; the result."""
        with smtp_sessions.track_inprogress():
            try:
                for index, claim in enumerate(self.claims):
                    if not self.send(index, claim, self.clock()):
                        break
            finally:
                self.close()
        return self.result

    def send(self, index: int, claim: SendClaim, now) -> bool:
        """Send the batch's claim at `index` and record its outcome; False when the rest
        of the batch was given back (the batch ends)."""
        step = self.steps[claim.enrollment.campaign_id].get(claim.step)
        margin = min(LEASE_MARGIN_SECONDS, settings.SENDING_LEASE_SECONDS / 4)
        if stopping.is_set() or now >= claim.lease_until - timedelta(seconds=margin):
            # The worker is shutting down, or the lease is nearly over (the scheduler
            # may hand these claims to another batch any moment): give the rest back,
            # due at once, rather than race it.
            for rest in self.claims[index:]:
                self._skip(rest, now)
            return False
        email = claim.enrollment.contact.email
        held = held_until(self.held, email)
        if held or self.credential.disabled_at is not None or step is None:
            # Held toward a provider paused meanwhile (due after the pause, no attempt
            # counted), disabled by this batch's bounces, or the step was removed: the
            # scheduler decides again (another mailbox, or completion).
            self._skip(claim, now, held)
            return True
        if not self.simulated and email.lower().endswith(f"@{SIMULATOR_DOMAIN}"):
            # The last guard (every way in refuses them): a real mailbox never sends to
            # the simulator's addresses (outreach.emails); failed, never asked of a server.
            self._undeliverable(claim, SIMULATOR_ADDRESS_REFUSED, now)
            return True
        if self.conn is None and not self._connect(index, now):
            return False
        outgoing = self._prepare(claim, step, now)
        if outgoing is None:
            return True
        options = self._options(claim, outgoing, now)
        if options is None:
            return True
        return self._transact(index, claim, outgoing, options, now)

    def close(self) -> None:
        if self.conn is not None:
            connection_release()
            smtp_close(self.conn)
            self.conn = None

    def _counted(self, outcome: str, claim: SendClaim, now) -> None:
        """A message's outcome, in the batch's result and the service's metrics."""
        name = _RESULT_FIELDS[outcome]
        setattr(self.result, name, getattr(self.result, name) + 1)
        campaign_id = claim.enrollment.campaign_id
        if name != "sent" or not leads_to_email(self.steps[campaign_id], claim.step):
            # A bounce, a failure or a last step ends the enrollment; a deferral may
            # (its last attempt): the campaign may be done.
            self.ended.add(campaign_id)
        send_observe(
            outcome=outcome, auth_method=self.credential.auth_method, due_at=claim.due_at, now=now
        )

    def _skip(self, claim: SendClaim, now, until: datetime | None = None) -> None:
        claim_release(claim, now=now, next_send_at=until or now)
        self.result.skipped += 1

    def _connect(self, index: int, now) -> bool:
        """Open the connection; False when the mailbox cannot send (the rest of the
        batch is given back, or retried)."""
        connection_release()  # no database connection held while connecting
        started = time.monotonic()
        try:
            connect = SimulatedSMTP if self.simulated else smtp_connect
            self.conn = connect(self.credential)
        except MailboxError as exc:
            self._abandon(index, exc, now, started)
            return False
        except TemporaryError as exc:
            # Counted against each claim left, as an attempt that failed to connect.
            attempt = self._attempt(Outcome.DEFERRED, exc, started)
            credential_error_record(credential=self.credential, attempt=attempt, now=now)
            retried = 0
            for rest in self.claims[index:]:
                at = temporary_record(
                    claim=rest, enrollment=rest.enrollment, attempt=attempt, now=now
                )
                self.result.retried_at(attempt.text, at)
                retried += at is not None
                self._counted("deferred", rest, now)
            logger.warning(
                "mailbox %s cannot connect: retried: %d, next try at %s; failed: %d: %s",
                self.credential.pk,
                retried,
                _when(self.result.retry_at),
                len(self.claims) - index - retried,
                attempt.text,
            )
            return False
        if self.credential.last_error:
            # The mailbox works again: its error is history.
            SmtpCredential.objects.filter(pk=self.credential.pk).update(
                last_error="", last_error_at=None
            )
            self.credential.last_error = ""
        return True

    def _prepare(self, claim: SendClaim, step: CampaignStep, now) -> Outgoing | None:
        """The claim's message, its claim marked started; None when it is not to be
        sent (it could not be built, or the enrollment is no longer due)."""
        enrollment = claim.enrollment
        thread = self.threads.get(claim.enrollment_id)  # None: not a reply
        try:
            outgoing = message_build(
                credential=self.credential,
                campaign=enrollment.campaign,
                step=step,
                enrollment=enrollment,
                thread=thread or [],
                # Only a reply without an earlier message (an empty thread) needs it.
                first_subject=first_subject(self.steps[enrollment.campaign_id], enrollment)
                if thread == []
                else "",
                now=now,
                variant=self.variants[claim.enrollment_id],
            )
        except Exception as exc:  # noqa: BLE001 - one bad row must not stop the batch
            # Retrying cannot fix it, and it must not crash every batch it lands in.
            logger.error(
                "cannot build the message of enrollment %s", claim.enrollment_id, exc_info=exc
            )
            self._undeliverable(
                claim,
                f"The message could not be built: {type(exc).__name__}: {exc}"[:ERROR_MAX_CHARS],
                now,
            )
            return None
        if not mark_started(claim, outgoing, now):
            self._skip(claim, now)
            return None
        return outgoing

    def _options(self, claim: SendClaim, outgoing: Outgoing, now) -> tuple | None:
        """The MAIL FROM options the message needs; None when the server lacks one (the
        message is undeliverable over this mailbox)."""
        if not outgoing.needs_smtputf8:
            return ()
        assert self.conn is not None
        if not self.conn.has_extn("smtputf8"):
            self._undeliverable(
                claim,
                "The address has a non-ASCII local part and the SMTP server "
                "does not offer SMTPUTF8.",
                now,
            )
            return None
        return ("SMTPUTF8",)

    def _undeliverable(self, claim: SendClaim, error: str, now) -> None:
        attempt = AttemptOutcome.failed(Outcome.FAILED, error, finished_at=self.clock())
        undeliverable_record(claim=claim, enrollment=claim.enrollment, attempt=attempt, now=now)
        self._counted("failed", claim, now)

    def _attempt(self, outcome: str, failure: Exception, started: float) -> AttemptOutcome:
        """The attempt of a failure, timed from `started` (time.monotonic()); its text
        without the mailbox's secrets (a server may echo what AUTH sent)."""
        duration_ms = round((time.monotonic() - started) * 1000)
        attempt = AttemptOutcome.failed(
            outcome, failure, duration_ms=duration_ms, finished_at=self.clock()
        )
        return replace(attempt, text=secrets_hidden(attempt.text, self.credential))

    def _transact(self, index: int, claim: SendClaim, outgoing: Outgoing, options, now) -> bool:
        """Run the SMTP transaction and record its outcome; False when the mailbox
        failed (the rest of the batch is given back)."""
        assert self.conn is not None
        connection_release()  # the SMTP transaction holds no database connection
        reply_seen, reply, started = True, None, time.monotonic()
        if isinstance(self.conn, SimulatedSMTP):  # it answers a `softbounce` by the attempt
            self.conn.attempt = claim.enrollment.send_attempts + 1
        try:
            reply = smtp_transaction(
                self.conn, self.credential.from_email, outgoing.to_email, outgoing.data, options
            )
        except OutcomeUnknown as exc:
            # The whole message went out, maybe kept: sending it again could deliver it twice.
            logger.warning("enrollment %s: no reply to the message: %s", claim.enrollment_id, exc)
            reply_seen = False
            with contextlib.suppress(OSError):
                self.conn.close()  # no QUIT: a server that did not answer will not now
            self.conn = None
        except Exception as exc:  # noqa: BLE001 - classified below, unknown ones re-raised
            return self._failed(index, claim, exc, now, started)
        # The mailbox's pace counts from here, the server's reply (or the end of the
        # wait for it), not from the send's start: a slow session must not bring the
        # next send closer than the minimum, as the server sees the two.
        accepted_at = self.clock()
        # Recorded (committed) before the next MAIL FROM on this connection.
        enrollment = claim.enrollment
        recorded = sent_record(
            claim=claim,
            enrollment=enrollment,
            campaign=enrollment.campaign,
            credential=self.credential,
            steps=self.steps[enrollment.campaign_id],
            outgoing=outgoing,
            now=now,
            reply_seen=reply_seen,
            accepted_at=accepted_at,
            reply=reply,
            duration_ms=round((time.monotonic() - started) * 1000),
        )
        if recorded:  # else the scheduler's recovery recorded and counted it
            self._counted("accepted" if reply_seen else "unknown", claim, now)
        if self.simulated:  # what follows the SMTP stage, once the record commits
            outcome_on_commit(message_id=outgoing.message_id, to_email=outgoing.to_email)
        return True

    def _failed(self, index: int, claim: SendClaim, exc: Exception, now, started: float) -> bool:
        """Record a failed transaction by its class (smtp_error_classify re-raises an
        unknown one); False when the mailbox failed."""
        failure = smtp_error_classify(exc)
        strike = strike_reason(code=getattr(failure, "code", None), text=str(failure))
        if isinstance(failure, PermanentError):
            bounce_record(
                claim=claim,
                enrollment=claim.enrollment,
                credential=self.credential,
                attempt=self._attempt(Outcome.BOUNCED, failure, started),
                now=now,
            )
            self.credential.refresh_from_db(fields=["disabled_at"])
            self._counted("bounced", claim, now)
        elif isinstance(failure, MailboxError):
            self._abandon(index, failure, now, started)
            return False
        else:
            attempt = self._attempt(Outcome.DEFERRED, failure, started)
            retry_at = temporary_record(
                claim=claim, enrollment=claim.enrollment, attempt=attempt, now=now
            )
            self.result.retried_at(attempt.text, retry_at)
            self._counted("deferred", claim, now)
            logger.warning(
                "enrollment %s: %s: %s",
                claim.enrollment_id,
                f"retried, next try at {_when(retry_at)}" if retry_at else "not retried",
                attempt.text,
            )
            # A 421 closes the session (RFC 5321 3.8; smtp_transaction closed it too).
            if isinstance(exc, (smtplib.SMTPServerDisconnected, OSError)) or attempt.code == 421:
                smtp_close(self.conn)  # type: ignore[arg-type]  # the failure's connection
                self.conn = None  # reconnect for the next message
        if strike:  # recorded: a pause of the mailbox toward a provider may begin with it
            self.held = pauses_of(self.credential.pk, now=now)
        return True

    def _abandon(self, index: int, failure: Exception, now, started: float) -> None:
        """The mailbox failed: record it (the claim it failed on keeps it as its
        attempt), give every claim back to be tried after
        SENDING_CREDENTIAL_RETRY_SECONDS, without counting an attempt against anyone."""
        attempt = self._attempt(Outcome.MAILBOX_FAILED, failure, started)
        later = now + timedelta(seconds=settings.SENDING_CREDENTIAL_RETRY_SECONDS)
        credential_error_record(
            credential=self.credential,
            attempt=attempt,
            now=now,
            claim=self.claims[index],
            retry_at=later,
        )
        for claim in self.claims[index + 1 :]:
            claim_release(claim, now=now, next_send_at=later)
        self.result.mailbox_error = attempt.text
        self.result.retried_at(attempt.text, later)
        logger.warning(
            "mailbox %s cannot send, next try at %s: %s",
            self.credential.pk,
            _when(later),
            attempt.text,
        )


def _when(at: datetime | None) -> str:
    """A retry time as the API writes it (to the second); "none" when nothing waits."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if at is not None else "none"
