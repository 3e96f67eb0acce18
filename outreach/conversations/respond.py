"""Responding to a reply (docs/conversations.md, "Responding"): the answer goes out at
once, in the same thread, from the mailbox that received the reply, over the same SMTP
path and under the same unknown-outcome rule as a step (docs/sending.md).

A response is a row first (`response_create`, with its Message-ID, subject and thread
headers fixed then), sent by `outreach.tasks.send_response` after the commit:

1. mark it started: `sending_at`, a conditional UPDATE of a queued response not started
   yet, right before the SMTP transaction; a task run twice (a broker redelivery, the
   recovery's re-queue) finds it marked and sends nothing;
2. the SMTP transaction over a new connection of the mailbox (outreach.sending.smtp:
   the outbound guard, OAuth's XOAUTH2);
3. record the outcome, conditional on the mark: accepted (or its reply never seen:
   `reply_seen` false, never sent again) -> `sent`, the period's usage +1, the mailbox's
   sent_count and daily count +1; a 5xx or a mailbox failure -> `failed` with the error
   (the person may respond again); a 4xx or a broken connection -> retried after
   SENDING_RETRY_SCHEDULE, `failed` after SENDING_MAX_ATTEMPTS.

`responses_recover` (beat, every SENDING_SCHEDULE_INTERVAL_SECONDS) records a response
whose worker was lost after its mark as sent with its reply unseen, and queues the
responses that are due (a retry's time came, or their task was lost).

Bodies are never logged.
"""

import contextlib
import logging
import re
from datetime import datetime, timedelta
from email.utils import format_datetime

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from billing.usage import usage_record_increment
from config.db import connection_release
from outreach.conversations.models import Reply, ReplyResponse
from outreach.errors import ContactSuppressed, CredentialUnavailable
from outreach.mailboxes.models import SmtpCredential
from outreach.mailboxes.pace import daily_used, utc_day
from outreach.sending.message import (
    address_headers,
    message_data,
    message_id_make,
    reply_subject,
)
from outreach.sending.record import retry_delay
from outreach.sending.smtp import (
    ERROR_MAX_CHARS,
    UNSEEN_REPLY_NOTE,
    MailboxError,
    OutcomeUnknown,
    PermanentError,
    TemporaryError,
    smtp_close,
    smtp_connect,
    smtp_error_classify,
    smtp_transaction,
)

logger = logging.getLogger(__name__)

# Message-IDs a References header carries at most: the thread's first and its latest
# (RFC 5322 3.6.4 lets a long chain be trimmed; clients thread by the ends of it).
REFERENCES_MAX = 20
# A Message-ID as the parser keeps it (without brackets): no space, no bracket, no
# control character, so that it cannot break or add a header.
_MESSAGE_ID = re.compile(r"[!-;=?-~]{1,250}")

SUPPRESSED_ERROR = "The contact unsubscribed or bounced since the response was written."


# --- creating -------------------------------------------------------------------------------


def credential_unavailable_reason(credential: SmtpCredential | None) -> str | None:
    """Why the mailbox cannot send a response (`deleted`, `disabled`,
    `reauthorization_required`), or None when it can."""
    if credential is None:
        return "deleted"
    if credential.disabled_at is not None:
        return "disabled"
    if credential.oauth_status == SmtpCredential.OAuthStatus.REAUTHORIZATION_REQUIRED:
        return "reauthorization_required"
    return None


def contact_suppressed_reason(contact) -> str | None:
    if contact.unsubscribed_at is not None:
        return "unsubscribed"
    if contact.bounced_at is not None:
        return "bounced"
    return None


def thread_references(reply: Reply) -> list[str]:
    """The response's References: the reply's chain and then the reply itself, each
    Message-ID once, in order, malformed ones left out, at most REFERENCES_MAX (the
    first and the latest)."""
    chain: list[str] = []
    for message_id in [*reply.references, reply.message_id]:
        valid = isinstance(message_id, str) and _MESSAGE_ID.fullmatch(message_id)
        if valid and message_id not in chain:
            chain.append(message_id)
    if len(chain) > REFERENCES_MAX:
        chain = [chain[0], *chain[-(REFERENCES_MAX - 1) :]]
    return chain


def response_create(
    *, account, reply: Reply, body_text: str, body_html: str = "", now: datetime | None = None
) -> ReplyResponse:
    """A response to `reply`, queued: its send starts once the row is committed.

    CredentialUnavailable when the reply's mailbox was deleted, is disabled or needs
    re-authorization; ContactSuppressed when the contact unsubscribed or bounced. Not
    subject to the plan's soft cap (it is not a new dispatch), nor to pace or send
    windows; counted in the period's sends once the server has it."""
    reason = credential_unavailable_reason(reply.credential)
    if reason is not None:
        raise CredentialUnavailable(details={"reason": reason})
    reason = contact_suppressed_reason(reply.contact)
    if reason is not None:
        raise ContactSuppressed(details={"reason": reason})
    credential = reply.credential
    assert credential is not None  # credential_unavailable_reason
    now = now or timezone.now()
    in_reply_to = reply.message_id if _MESSAGE_ID.fullmatch(reply.message_id) else ""
    with transaction.atomic():
        response = ReplyResponse.objects.create(
            account=account,
            reply=reply,
            enrollment_id=reply.enrollment_id,
            contact_id=reply.contact_id,
            credential=credential,
            message_id=message_id_make(credential),
            to_email=reply.from_email or reply.contact.email,
            # One line: a subject read from a message cannot add a header.
            subject=reply_subject(" ".join(reply.subject.split()))[:998],
            body_text=body_text,
            body_html=body_html,
            in_reply_to=in_reply_to,
            references=thread_references(reply),
            # Not started by then: its task was lost, the recovery queues it again.
            next_attempt_at=now + _lease(),
        )
        transaction.on_commit(lambda: responses_enqueue([response.pk]))
    return response


def responses_enqueue(response_ids: list) -> None:
    """Queue the send of each response. A failure only delays it: the recovery queues it
    again after SENDING_LEASE_SECONDS."""
    # The task's module imports this one.
    from outreach.conversations.tasks import send_response

    for response_id in response_ids:
        try:
            send_response.apply_async((str(response_id),), retry=False)
        except Exception:
            logger.warning(
                "response %s not queued; the recovery retries", response_id, exc_info=True
            )


def _lease() -> timedelta:
    return timedelta(seconds=settings.SENDING_LEASE_SECONDS)


# --- sending --------------------------------------------------------------------------------


def response_send(*, response_id, now: datetime | None = None) -> str:
    """Send one queued response and record the outcome (module docstring). Returns what
    happened: `sent`, `unseen` (sent, its reply never seen), `failed`, `retry`, or
    `skipped` (not queued, or started by another task)."""
    now = now or timezone.now()
    response = (
        ReplyResponse.objects.select_related("credential", "contact", "reply", "account")
        .filter(pk=response_id, status=ReplyResponse.Status.QUEUED, sending_at=None)
        .first()
    )
    if response is None:
        return "skipped"
    if contact_suppressed_reason(response.contact) is not None:
        return _failed(response, SUPPRESSED_ERROR, now, started=False)
    reason = credential_unavailable_reason(response.credential)
    if reason is not None:
        error = f"The mailbox cannot send ({reason.replace('_', ' ')})."
        return _failed(response, error, now, started=False)
    credential = response.credential
    assert credential is not None
    connection_release()  # no database connection held while connecting
    try:
        conn = smtp_connect(credential)
    except MailboxError as exc:
        return _failed(response, str(exc), now, started=False)
    except TemporaryError as exc:
        return _temporary(response, str(exc), now, started=False)
    try:
        return _transact(response, credential, conn, now)
    finally:
        smtp_close(conn)


def _transact(response: ReplyResponse, credential: SmtpCredential, conn, now: datetime) -> str:
    data, recipient = response_message(response, credential, now)
    options: tuple = ()
    if recipient is None:
        if not conn.has_extn("smtputf8"):
            error = (
                "The address has a non-ASCII local part and the SMTP server does not "
                "offer SMTPUTF8."
            )
            return _failed(response, error, now, started=False)
        options = ("SMTPUTF8",)
    if not _mark_started(response, now):
        if _mine(response, started=False).exists():  # still queued: its contact is suppressed
            return _failed(response, SUPPRESSED_ERROR, now, started=False)
        return "skipped"
    connection_release()  # the SMTP transaction holds no database connection
    try:
        smtp_transaction(conn, credential.from_email, recipient or response.to_email, data, options)
    except OutcomeUnknown as exc:
        # The whole message went out; whether the server kept it is unknown. Sending it
        # again could deliver it twice: it counts as sent.
        logger.warning("response %s: no reply to the message: %s", response.pk, exc)
        with contextlib.suppress(OSError):
            conn.close()  # no QUIT: a server that did not answer will not now
        _sent_record(response, now=now, reply_seen=False)
        return "unseen"
    except Exception as exc:  # noqa: BLE001 - classified below, unknown ones re-raised
        failure = smtp_error_classify(exc)
        if isinstance(failure, TemporaryError):
            return _temporary(response, str(failure), now, started=True)
        # A 5xx to RCPT or DATA, or the mailbox refused the sender: failed, never a
        # bounce (a response does not end the enrollment); the person may try again.
        assert isinstance(failure, (PermanentError, MailboxError))
        return _failed(response, str(failure), now, started=True)
    _sent_record(response, now=now, reply_seen=True)
    return "sent"


def response_message(
    response: ReplyResponse, credential: SmtpCredential, now: datetime
) -> tuple[bytes, str | None]:
    """The response's MIME message, with the policy and header rules of a step
    (outreach.sending.message), and the envelope recipient (None when the address needs
    SMTPUTF8). No unsubscribe link, footer or open pixel: it is a person's answer."""
    headers, recipient = address_headers(credential, response.reply.from_name, response.to_email)
    headers += [("Subject", response.subject)]
    if response.in_reply_to:
        headers.append(("In-Reply-To", f"<{response.in_reply_to}>"))
    if response.references:
        headers.append(("References", " ".join(f"<{r}>" for r in response.references)))
    headers += [
        ("Date", format_datetime(now)),
        ("Message-ID", f"<{response.message_id}>"),
        ("X-Auto-Response-Suppress", "OOF, AutoReply"),
    ]
    html = response.body_html if response.body_html.strip() else None
    data = message_data(headers, response.body_text, html, smtputf8=recipient is None)
    return data, recipient


def _mark_started(response: ReplyResponse, now: datetime) -> bool:
    """The conditional UPDATE that makes this task the one sending the response, if its
    contact is still not suppressed."""
    marked = (
        _mine(response, started=False)
        .filter(contact__unsubscribed_at=None, contact__bounced_at=None)
        .update(sending_at=now, updated_at=now)
    )
    if marked:
        response.sending_at = now
    return marked == 1


def _mine(response: ReplyResponse, *, started: bool):
    """The response's row, if it is still this task's: queued and, once marked, with
    this task's mark."""
    rows = ReplyResponse.objects.filter(pk=response.pk, status=ReplyResponse.Status.QUEUED)
    return rows.filter(sending_at=response.sending_at if started else None)


def _sent_record(response: ReplyResponse, *, now: datetime, reply_seen: bool) -> bool:
    """Sent: the response, the period's usage and the mailbox's counters, in one
    transaction; nothing when the row is no longer this send's (recovered meanwhile)."""
    today = utc_day(now)
    with transaction.atomic():
        recorded = _mine(response, started=True).update(
            status=ReplyResponse.Status.SENT,
            sent_at=now,
            reply_seen=reply_seen,
            error="" if reply_seen else UNSEEN_REPLY_NOTE,
            updated_at=now,
        )
        if not recorded:
            return False
        usage_record_increment(account=response.account, at=now)
        if response.credential_id is not None:
            SmtpCredential.objects.filter(pk=response.credential_id).update(
                sent_count=F("sent_count") + 1,
                daily_sent_count=daily_used(today) + 1,
                daily_sent_on=today,
            )
    return True


def _failed(response: ReplyResponse, error: str, now: datetime, *, started: bool) -> str:
    _mine(response, started=started).update(
        status=ReplyResponse.Status.FAILED,
        error=error[:ERROR_MAX_CHARS],
        sending_at=None,
        updated_at=now,
    )
    return "failed"


def _temporary(response: ReplyResponse, error: str, now: datetime, *, started: bool) -> str:
    """A 4xx or a broken connection: retried after SENDING_RETRY_SCHEDULE (the recovery
    queues it when due), failed after SENDING_MAX_ATTEMPTS."""
    attempts = response.attempts + 1
    if attempts >= settings.SENDING_MAX_ATTEMPTS:
        _mine(response, started=started).update(
            status=ReplyResponse.Status.FAILED,
            attempts=attempts,
            error=error[:ERROR_MAX_CHARS],
            sending_at=None,
            updated_at=now,
        )
        return "failed"
    _mine(response, started=started).update(
        attempts=attempts,
        error=error[:ERROR_MAX_CHARS],
        sending_at=None,
        next_attempt_at=now + retry_delay(attempts),
        updated_at=now,
    )
    return "retry"


# --- recovery -------------------------------------------------------------------------------


def responses_recover(*, now: datetime | None = None) -> tuple[int, int]:
    """Beat: (1) responses marked started more than a lease (SENDING_LEASE_SECONDS) ago
    and still queued lost their worker during the SMTP transaction or before its record:
    recorded as sent with their reply unseen, never sent again; (2) queued responses not
    started whose time came (a retry's, or the lease of a task that was lost) are queued
    again. Returns (recorded, queued)."""
    now = now or timezone.now()
    queued = ReplyResponse.objects.filter(status=ReplyResponse.Status.QUEUED)
    interrupted = list(
        queued.filter(sending_at__lte=now - _lease())
        .select_related("account")
        .order_by("sending_at")[:1000]
    )
    recorded = 0
    for response in interrupted:
        assert response.sending_at is not None
        recorded += _sent_record(response, now=response.sending_at, reply_seen=False)
    if recorded:
        logger.warning("%d responses interrupted by a lost worker: recorded as sent", recorded)
    due = list(
        queued.filter(Q(next_attempt_at__lte=now) | Q(next_attempt_at=None), sending_at=None)
        .order_by("next_attempt_at")
        .values_list("pk", flat=True)[:1000]
    )
    if not due:
        return recorded, 0
    with transaction.atomic():
        # Taken with a conditional UPDATE: another beat's run does not queue them too; not
        # started by the new time, they are queued again then.
        taken = list(
            ReplyResponse.objects.filter(
                Q(next_attempt_at__lte=now) | Q(next_attempt_at=None),
                pk__in=due,
                status=ReplyResponse.Status.QUEUED,
                sending_at=None,
            )
            .select_for_update(skip_locked=True)
            .values_list("pk", flat=True)
        )
        ReplyResponse.objects.filter(pk__in=taken).update(
            next_attempt_at=now + _lease(), updated_at=now
        )
        transaction.on_commit(lambda: responses_enqueue(taken))
    return recorded, len(taken)
