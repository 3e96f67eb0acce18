"""Sending a response to a reply (docs/conversations.md, "Responding"), as
`outreach.tasks.send_response` runs it:

1. mark it started: `sending_at`, a conditional UPDATE of a queued response not started
   yet whose contact is not suppressed, right before the SMTP transaction; a task run
   twice (a broker redelivery, the recovery's re-queue) finds it marked and sends
   nothing;
2. the SMTP transaction over a new connection of the mailbox (outreach.mailboxes.smtp:
   the outbound guard, OAuth's XOAUTH2), the message built like a step's
   (outreach.sending.message);
3. record the outcome, conditional on the mark: accepted (or its reply never seen:
   `reply_seen` false, never sent again) -> `sent`, the period's usage +1, the mailbox's
   sent_count and daily count +1; a 5xx or a mailbox failure -> `failed` with the error
   (the person may respond again); a 4xx or a broken connection -> retried after
   SENDING_RETRY_SCHEDULE (outreach.conversations.respond.responses_recover queues it
   when due), `failed` after SENDING_MAX_ATTEMPTS.

Bodies are never logged.
"""

import contextlib
import logging
from datetime import datetime
from email.utils import format_datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from billing.usage import usage_record_increment
from config.db import connection_release
from outreach.analytics import Hit, hits_add
from outreach.blocklist.selectors import blocked_among
from outreach.contacts.suppression import suppressions_for
from outreach.emails import InvalidEmail, email_clean
from outreach.mailboxes.pace import daily_used, utc_day
from outreach.mailboxes.smtp import smtp_close, smtp_connect
from outreach.models.conversations import ReplyResponse
from outreach.models.mailboxes import SmtpCredential
from outreach.sending.message import address_headers, message_data
from outreach.sending.record import retry_delay
from outreach.sending.smtp import (
    ERROR_MAX_CHARS,
    UNSEEN_REPLY_NOTE,
    MailboxError,
    OutcomeUnknown,
    PermanentError,
    TemporaryError,
    smtp_error_classify,
    smtp_transaction,
)

logger = logging.getLogger(__name__)

SUPPRESSED_ERROR = "The contact unsubscribed or bounced since the response was written."
BLOCKED_ERROR = "The address was put on the account's blocklist since the response was written."


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


def _address_key(address: str) -> str:
    """An address in the form contacts, suppressions and blocklist entries compare it in
    (lower case, an internationalised domain in Unicode)."""
    try:
        return email_clean(address).lower()
    except InvalidEmail:
        return address.strip().lower()


def recipient_suppressed_reason(*, account_id, contact, to_email: str) -> str | None:
    """Why a response may not go to `to_email`, the address the reply came from, as a
    step may not go to a suppressed contact: the contact unsubscribed or bounced, or the
    address itself is on the account's suppression list (a colleague of the contact who
    unsubscribed). `unsubscribed`, `bounced` or None; a query only when the address is
    not the contact's."""
    reason = contact_suppressed_reason(contact)
    key = _address_key(to_email)
    if reason is not None or key == contact.email_lower:
        return reason
    suppressed = suppressions_for(account_id=account_id, keys=[key]).get(key)
    if suppressed is None:
        return None
    return "unsubscribed" if suppressed.unsubscribed_at is not None else "bounced"


def recipient_blocked_entry(*, account_id, contact, to_email: str) -> str | None:
    """The account's blocklist entry that names the response's recipient or its contact
    (the address, its domain or a parent domain), as the send scheduler checks a step's;
    None when neither is blocked. One query."""
    keys = [_address_key(to_email), contact.email_lower]
    blocked = blocked_among(account_id=account_id, emails=keys)
    return next((blocked[key] for key in keys if key in blocked), None)


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
    recipient = {"account_id": response.account_id, "contact": response.contact}
    if recipient_suppressed_reason(**recipient, to_email=response.to_email) is not None:
        return _failed(response, SUPPRESSED_ERROR, now, started=False)
    if recipient_blocked_entry(**recipient, to_email=response.to_email) is not None:
        return _failed(response, BLOCKED_ERROR, now, started=False)
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
        sent_record(response, now=now, reply_seen=False)
        return "unseen"
    except Exception as exc:  # noqa: BLE001 - classified below, unknown ones re-raised
        failure = smtp_error_classify(exc)
        if isinstance(failure, TemporaryError):
            return _temporary(response, str(failure), now, started=True)
        # A 5xx to RCPT or DATA, or the mailbox refused the sender: failed, never a
        # bounce (a response does not end the enrollment); the person may try again.
        assert isinstance(failure, (PermanentError, MailboxError))
        return _failed(response, str(failure), now, started=True)
    sent_record(response, now=now, reply_seen=True)
    return "sent"


def response_headers(
    response: ReplyResponse, credential: SmtpCredential
) -> tuple[list[tuple[str, Any]], str | None]:
    """The response's From, To, Subject and thread headers (In-Reply-To, References), and
    the envelope recipient (address_headers). What its preview shows
    (outreach.conversations.respond.response_preview) and its message starts with."""
    headers, recipient = address_headers(credential, response.reply.from_name, response.to_email)
    headers += [("Subject", response.subject)]
    if response.in_reply_to:
        headers.append(("In-Reply-To", f"<{response.in_reply_to}>"))
    if response.references:
        headers.append(("References", " ".join(f"<{r}>" for r in response.references)))
    return headers, recipient


def response_message(
    response: ReplyResponse, credential: SmtpCredential, now: datetime
) -> tuple[bytes, str | None]:
    """The response's MIME message, with the policy and header rules of a step
    (outreach.sending.message), and the envelope recipient (None when the address needs
    SMTPUTF8). No unsubscribe link, footer or open pixel: it is a person's answer."""
    headers, recipient = response_headers(response, credential)
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


def sent_record(response: ReplyResponse, *, now: datetime, reply_seen: bool) -> bool:
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
        # The mailbox, the usage, the analytics last: the lock order of a send's record
        # (outreach.enrollments.stats, "Lock order").
        if response.credential_id is not None:
            SmtpCredential.objects.filter(pk=response.credential_id).update(
                sent_count=F("sent_count") + 1,
                daily_sent_count=daily_used(today) + 1,
                daily_sent_on=today,
            )
        usage_record_increment(account=response.account, at=now)
        hits_add([Hit("responses", response.enrollment_id, now)])
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
