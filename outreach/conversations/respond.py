"""Responding to a reply (docs/conversations.md, "Responding"): the answer goes out at
once, in the same thread, from the mailbox that received the reply, over the same SMTP
path and under the same unknown-outcome rule as a step (docs/sending.md).

A response is a row first (`response_create`, with its Message-ID, subject and thread
headers fixed then), sent by `outreach.tasks.send_response` after the commit
(outreach.conversations.response_sending: marked started, sent, its outcome recorded).

`responses_recover` (beat, every SENDING_SCHEDULE_INTERVAL_SECONDS) records a response
whose worker was lost after its mark as sent with its reply unseen, and queues the
responses that are due (a retry's time came, or their task was lost).

Bodies are never logged.
"""

import logging
import re
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from accounts.send_limits import key_sends_count
from config.api.errors import ServiceError, refusal_json
from outreach.conversations.response_sending import (
    credential_unavailable_reason,
    recipient_blocked_entry,
    recipient_suppressed_reason,
    response_headers,
    sent_record,
)
from outreach.conversations.tasks import send_response
from outreach.errors import ContactBlocked, ContactSuppressed, CredentialUnavailable
from outreach.models.conversations import Reply, ReplyResponse
from outreach.sending.message import message_id_make, reply_subject

logger = logging.getLogger(__name__)

# Message-IDs a References header carries at most: the thread's first and its latest
# (RFC 5322 3.6.4 lets a long chain be trimmed; clients thread by the ends of it).
REFERENCES_MAX = 20
# A Message-ID as the parser keeps it (without brackets): no space, no bracket, no
# control character, so that it cannot break or add a header.
_MESSAGE_ID = re.compile(r"[!-;=?-~]{1,250}")

# --- creating -------------------------------------------------------------------------------


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


def response_refusal(*, account, reply: Reply) -> ServiceError | None:
    """Why a response to `reply` would be refused, in the order response_create checks:
    CredentialUnavailable when the reply's mailbox was deleted, is disabled or needs
    re-authorization; ContactSuppressed when the contact, or the address the reply came
    from, unsubscribed or bounced; ContactBlocked when the account's blocklist names
    either (the checks of a step's send, outreach.sending.scheduler). None: it may go."""
    reason = credential_unavailable_reason(reply.credential)
    if reason is not None:
        return CredentialUnavailable(details={"reason": reason})
    recipient = {"account_id": account.pk, "contact": reply.contact, "to_email": _to(reply)}
    reason = recipient_suppressed_reason(**recipient)
    if reason is not None:
        return ContactSuppressed(details={"reason": reason})
    entry = recipient_blocked_entry(**recipient)
    if entry is not None:
        return ContactBlocked(details={"reason": "blocked", "entry": entry})
    return None


def _to(reply: Reply) -> str:
    return reply.from_email or reply.contact.email


def response_draft(*, account, reply: Reply, body_text: str, body_html: str) -> ReplyResponse:
    """The response's row as response_create writes it, unsaved and without its
    Message-ID (made when it is written): its recipient, its subject (`Re: <the
    reply's subject>` on one line, at most 998 characters: RFC 5322's line) and its
    thread headers. Its mailbox must be there (response_refusal)."""
    return ReplyResponse(
        account=account,
        reply=reply,
        enrollment_id=reply.enrollment_id,
        contact_id=reply.contact_id,
        credential=reply.credential,
        to_email=_to(reply),
        # One line: a subject read from a message cannot add a header.
        subject=reply_subject(" ".join(reply.subject.split()))[:998],
        body_text=body_text,
        body_html=body_html,
        in_reply_to=reply.message_id if _MESSAGE_ID.fullmatch(reply.message_id) else "",
        references=thread_references(reply),
    )


def response_preview(*, account, reply: Reply, body_text: str, body_html: str = "") -> dict:
    """What POST /replies/:id/respond with these bodies would send now, written nowhere
    (POST /replies/:id/respond/preview): the recipient, the subject and the headers as
    the message carries them (outreach.conversations.response_sending.response_headers;
    without Date and Message-ID, made when it is sent), the bodies, and the refusal the
    request would answer instead (its status and envelope), or None."""
    refusal = response_refusal(account=account, reply=reply)
    headers: list = []
    draft = response_draft(account=account, reply=reply, body_text=body_text, body_html=body_html)
    if reply.credential is not None:
        headers, _ = response_headers(draft, reply.credential)
    return {
        "reply_id": reply.pk,
        "credential_id": reply.credential_id,
        "to": draft.to_email,
        "subject": draft.subject,
        "in_reply_to": draft.in_reply_to or None,
        "references": draft.references,
        "headers": [{"name": name, "value": str(value)} for name, value in headers],
        "body_text": body_text,
        "body_html": body_html,
        "refusal": refusal_json(refusal) if refusal is not None else None,
    }


def response_create(
    *,
    account,
    reply: Reply,
    body_text: str,
    body_html: str = "",
    now: datetime | None = None,
    api_key=None,
) -> ReplyResponse:
    """A response to `reply`, queued: its send starts once the row is committed.

    Refused as response_refusal says (nothing written). Not subject to the plan's soft
    cap (it is not a new dispatch), nor to pace or send windows; counted in the period's
    sends once the server has it, and against `api_key`'s daily send limit in the row's
    transaction (KeySendLimitReached: nothing queued)."""
    refusal = response_refusal(account=account, reply=reply)
    if refusal is not None:
        raise refusal
    assert reply.credential is not None  # response_refusal
    now = now or timezone.now()
    response = response_draft(
        account=account, reply=reply, body_text=body_text, body_html=body_html
    )
    response.message_id = message_id_make(reply.credential)
    # Not started by then: its task was lost, the recovery queues it again.
    response.next_attempt_at = now + _lease()
    with transaction.atomic():
        key_sends_count(api_key=api_key, count=1, now=now)
        response.save(force_insert=True)
        transaction.on_commit(lambda: responses_enqueue([response.pk]))
    return response


def responses_enqueue(response_ids: list) -> None:
    """Queue the send of each response. A failure only delays it: the recovery queues it
    again after SENDING_LEASE_SECONDS."""
    for response_id in response_ids:
        try:
            send_response.apply_async((str(response_id),), retry=False)
        except Exception:
            logger.warning(
                "response %s not queued; the recovery retries", response_id, exc_info=True
            )


def _lease() -> timedelta:
    return timedelta(seconds=settings.SENDING_LEASE_SECONDS)


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
        recorded += sent_record(response, now=response.sending_at, reply_seen=False)
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
