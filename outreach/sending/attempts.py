"""The record of an SMTP attempt: the send claim's row, finished by the transaction that
records its outcome (outreach.sending.record) instead of being deleted, as a webhook
delivery keeps its attempt. One row per attempt: the step, the mailbox, the outcome, the
server's reply code and text, the duration, whether the outcome is unknown
(docs/sending.md, "Attempts"). `BatchResult`: what a batch's attempts add up to."""

from dataclasses import dataclass
from datetime import datetime

from outreach.models.sending import SendClaim
from outreach.sending.smtp import ERROR_MAX_CHARS, UNSEEN_REPLY_NOTE

Outcome = SendClaim.Outcome


@dataclass(frozen=True)
class AttemptOutcome:
    """How an SMTP attempt ended, as its row records it. `text` is the server's reply or
    the failure, and the `last_error` the enrollment or the mailbox shows for it: one
    text, made once (`failed`)."""

    outcome: str
    text: str = ""
    code: int | None = None
    duration_ms: int | None = None
    unknown: bool = False
    finished_at: datetime | None = None  # None: the record's `now`

    @classmethod
    def sent(
        cls,
        reply_seen: bool,
        reply: tuple[int, str] | None,
        duration_ms: int | None,
        finished_at: datetime,
    ) -> "AttemptOutcome":
        """A sent message's attempt: `reply` is the server's (code, text) to the end of
        DATA; without `reply_seen` it never came (counted as sent, its outcome unknown)."""
        if not reply_seen:
            return cls(Outcome.SENT, UNSEEN_REPLY_NOTE, None, duration_ms, True, finished_at)
        code, text = reply or (None, "")
        return cls(Outcome.SENT, text, code, duration_ms, finished_at=finished_at)

    @classmethod
    def failed(
        cls,
        outcome: str,
        failure: Exception | str,
        *,
        duration_ms: int | None = None,
        finished_at: datetime | None = None,
    ) -> "AttemptOutcome":
        """The attempt of a failure (a SendFailure carries the reply code)."""
        return cls(
            outcome,
            str(failure)[:ERROR_MAX_CHARS],
            getattr(failure, "code", None),
            duration_ms,
            finished_at=finished_at,
        )


def attempt_finish(claim: SendClaim, attempt: AttemptOutcome, *, now: datetime) -> bool:
    """Finish the claim's row as the record of its attempt (its message text emptied: a
    sent one keeps it in its Message). False when it is not open any more (finished, or
    given back and claimed again meanwhile): the caller records nothing."""
    return bool(
        SendClaim.objects.filter(pk=claim.pk, finished_at=None).update(
            finished_at=attempt.finished_at or now,
            outcome=attempt.outcome,
            reply_code=attempt.code,
            reply_text=attempt.text,
            outcome_unknown=attempt.unknown,
            duration_ms=attempt.duration_ms,
            text="",
        )
    )


@dataclass
class BatchResult:
    sent: int = 0
    bounced: int = 0
    retried: int = 0
    failed: int = 0
    skipped: int = 0
    mailbox_error: str = ""
    # Why sends were put off (the last failure's words, secrets hidden), and the earliest
    # time one of them is tried again: the worker's log says both.
    retry_reason: str = ""
    retry_at: datetime | None = None

    def retried_at(self, reason: str, at: datetime | None) -> None:
        if at is not None:
            self.retry_reason = reason
            self.retry_at = at if self.retry_at is None else min(self.retry_at, at)
