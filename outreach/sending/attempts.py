"""The record of an SMTP attempt: the send claim's row, finished by the transaction that
records its outcome (outreach.sending.record) instead of being deleted, as a webhook
delivery keeps its attempt. One row per attempt: the step, the mailbox, the outcome, the
server's reply code and text, the duration, whether the outcome is unknown
(docs/sending.md, "Attempts")."""

import base64
from dataclasses import dataclass
from datetime import datetime

from config.logs import REDACTED
from outreach.models.mailboxes import SmtpCredential
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


# The mailbox's secrets an SMTP server or a token endpoint could echo into an error text.
_SECRET_FIELDS = ("smtp_password", "imap_password", "oauth_refresh_token", "oauth_access_token")


def secrets_hidden(text: str, credential: SmtpCredential) -> str:
    """`text` (a recorded error) without the mailbox's secrets, as sent or as AUTH sends
    them (base64): what the API, the clients and the logs may show of it."""
    for name in _SECRET_FIELDS:
        secret = getattr(credential, name, "")
        if not secret or len(secret) < 4:
            continue
        for form in (secret, base64.b64encode(secret.encode()).decode()):
            text = text.replace(form, REDACTED)
        if credential.smtp_username and name == "smtp_password":
            plain = f"\0{credential.smtp_username}\0{secret}".encode()
            text = text.replace(base64.b64encode(plain).decode(), REDACTED)
    return text
