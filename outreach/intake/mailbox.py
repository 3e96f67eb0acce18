"""IMAP polling: replies and delivery status reports in a credential's mailbox.

One poll of one mailbox, in order:
1. connect (SSL, STARTTLS or plain, as the credential says) with a timeout, log in,
   EXAMINE the INBOX (read-only: nothing is marked seen or moved);
2. compare UIDVALIDITY with the stored one; on the first poll or a change, start
   again from the messages received since the first message this mailbox sent
   (UIDs of another UIDVALIDITY mean nothing);
3. list the UIDs above the last one seen and fetch them in batches of
   IMAP_FETCH_BATCH_SIZE, at most IMAP_MAX_MESSAGES_PER_POLL per poll (the rest
   waits for the next round), headers (each at most IMAP_MAX_HEADER_BYTES, a batch's
   at most IMAP_FETCH_MAX_BYTES) and sizes first;
4. match each message (delivery report, a message of a contact we wrote to,
   unrelated): a delivery report is read whole and handed to the bounce service; the
   messages matched to an enrollment are read whole (each at most
   IMAP_MAX_MESSAGE_BYTES, fetched in groups of at most IMAP_FETCH_MAX_BYTES, so a
   poll's memory stays bounded) and kept as replies (outreach.intake.replies, which
   labels them: reply, out-of-office, auto-reply, unsubscribe request); the services
   are idempotent, so a message seen twice after a crash changes nothing more;
5. after each batch remember the last UID (only ever forward); at the end record
   the poll time, or the error on the credential (the next round retries).

No message stops a mailbox's intake: whatever one message raises while it is matched,
applied or kept is that message's `unreadable` outcome (a matched one is still kept,
as unparsed, with the reason as its defect), named with its UID in `imap_last_error`,
and the poll goes on past it. Only what is not the message's doing ends a poll: the
mailbox's connection (its error is the poll's) and the database's (the task fails and
the next round reads the message again).
"""

import contextlib
import imaplib
import logging
import re
import socket
import ssl
from dataclasses import dataclass, field
from datetime import timedelta

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.db.models import Min, Q
from django.utils import timezone

from config.outbound import OutboundRefused
from outreach.conversations.parse import message_unparsed, text_storable
from outreach.intake.inbound import UNREADABLE, Match, Outcome, message_match, reply_keep
from outreach.mailboxes.imap import MailboxUnreachable, imap_connect
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Message

logger = logging.getLogger(__name__)


# Errors that are not one message's doing: the mailbox's connection (the poll's error)
# and the database's (the task fails; the message is read again next round).
_MAILBOX_ERRORS = (
    OSError,
    imaplib.IMAP4.error,
    MailboxUnreachable,
    ssl.SSLError,
    EOFError,
    OutboundRefused,
)
_NOT_THE_MESSAGE = (*_MAILBOX_ERRORS, OperationalError, InterfaceError, SoftTimeLimitExceeded)


@dataclass
class PollResult:
    credential_id: str
    outcomes: list[Outcome] = field(default_factory=list)
    error: str = ""
    more: bool = False  # messages left for the next round
    unreadable: list[str] = field(default_factory=list)  # "uid N: what it raised"

    def count(self, kind: str) -> int:
        return sum(1 for o in self.outcomes if o.kind == kind)


def _check(response: tuple, what: str):
    kind, data = response
    if kind != "OK":
        raise MailboxUnreachable(f"{what}: {kind} {data!r}")
    return data


def _uids(data) -> list[int]:
    return sorted({int(x) for x in (data[0] or b"").split()}) if data else []


def _fetch(client: imaplib.IMAP4, uids: list[int], item: str) -> dict[int, bytes]:
    """UID FETCH of one item for many messages: {uid: bytes}."""
    return {uid: data for uid, (_, data) in _fetch_sized(client, uids, item).items()}


def _fetch_sized(client: imaplib.IMAP4, uids: list[int], item: str) -> dict[int, tuple[int, bytes]]:
    """UID FETCH of RFC822.SIZE and one item for many messages: {uid: (size, bytes)}
    (size 0 when the item list did not ask for it)."""
    data = _check(client.uid("FETCH", ",".join(map(str, uids)), f"(UID {item})"), "FETCH")
    found: dict[int, tuple[int, bytes]] = {}
    for entry in data:
        if not isinstance(entry, tuple) or len(entry) < 2:
            continue
        match = re.search(rb"UID (\d+)", entry[0])
        if match:
            size = re.search(rb"RFC822\.SIZE (\d+)", entry[0])
            found[int(match.group(1))] = (int(size.group(1)) if size else 0, entry[1])
    return found


def _groups_by_bytes(matched: list[tuple[int, Match, int]], budget: int):
    """The matched messages in groups whose bytes to read (each message's size, capped
    at IMAP_MAX_MESSAGE_BYTES) stay within `budget` (a group holds one message at least)."""
    cap = settings.IMAP_MAX_MESSAGE_BYTES
    group: list[tuple[int, Match, int]] = []
    total = 0
    for entry in matched:
        size = min(entry[2] or cap, cap)
        if group and total + size > budget:
            yield group
            group, total = [], 0
        group.append(entry)
        total += size
    if group:
        yield group


def _start_uids(client: imaplib.IMAP4, credential: SmtpCredential) -> list[int]:
    """First poll, or a new UIDVALIDITY: the messages received since this mailbox's
    first send (a day's margin); none when it has sent nothing yet."""
    first = Message.objects.filter(credential=credential).aggregate(first=Min("sent_at"))["first"]
    if first is None:
        return []
    since = (first - timedelta(days=1)).strftime("%d-%b-%Y")
    return _uids(_check(client.uid("SEARCH", "SINCE", since), "SEARCH"))


def mailbox_poll(*, credential: SmtpCredential) -> PollResult:
    """Poll one credential's INBOX once (see the module docstring). Never raises for a
    mailbox problem: the error is recorded on the credential and returned."""
    result = PollResult(credential_id=str(credential.pk))
    try:
        _poll(credential, result)
    except _MAILBOX_ERRORS as exc:
        result.error = _describe(exc)
        now = timezone.now()
        SmtpCredential.objects.filter(pk=credential.pk).update(
            imap_last_error=text_storable(result.error)[:1000],
            imap_last_error_at=now,
            imap_last_polled_at=now,
        )
        logger.warning("mailbox %s: poll failed: %s", credential.pk, result.error)
        return result
    now = timezone.now()
    if result.unreadable:
        SmtpCredential.objects.filter(pk=credential.pk).update(
            imap_last_error=text_storable("; ".join(result.unreadable))[:1000],
            imap_last_error_at=now,
            imap_last_polled_at=now,
        )
    else:
        SmtpCredential.objects.filter(pk=credential.pk).update(
            imap_last_error="", imap_last_polled_at=now
        )
    return result


def _describe(exc: Exception) -> str:
    if isinstance(exc, OutboundRefused):
        return f"refused: {exc}"
    if isinstance(exc, socket.timeout | TimeoutError):
        return f"timed out after {settings.IMAP_TIMEOUT_SECONDS}s"
    text = str(exc) or exc.__class__.__name__
    return f"{exc.__class__.__name__}: {text}"


def _poll(credential: SmtpCredential, result: PollResult) -> None:
    client = imap_connect(credential)
    try:
        _check(client.select("INBOX", readonly=True), "EXAMINE INBOX")
        validity_data = client.response("UIDVALIDITY")[1]
        validity = int(validity_data[0]) if validity_data and validity_data[0] else None

        last_uid = credential.imap_last_uid
        if validity != credential.imap_uidvalidity or last_uid is None:
            uids = _start_uids(client, credential)
            if not uids:
                # Nothing to look at yet: start after the newest message.
                existing = _uids(_check(client.uid("SEARCH", "ALL"), "SEARCH"))
                last_uid = existing[-1] if existing else 0
            else:
                last_uid = uids[0] - 1
            SmtpCredential.objects.filter(pk=credential.pk).update(
                imap_uidvalidity=validity, imap_last_uid=last_uid
            )
            credential.imap_uidvalidity, credential.imap_last_uid = validity, last_uid
        else:
            uids = _uids(_check(client.uid("SEARCH", "UID", f"{last_uid + 1}:*"), "SEARCH"))
        # "n:*" names the newest message even when it is below n.
        uids = [uid for uid in uids if uid > last_uid]
        limit = settings.IMAP_MAX_MESSAGES_PER_POLL
        result.more = len(uids) > limit
        uids = uids[:limit]

        batch_size = settings.IMAP_FETCH_BATCH_SIZE
        for start in range(0, len(uids), batch_size):
            batch = uids[start : start + batch_size]
            outcomes = _batch_handle(client, credential, batch, validity)
            result.outcomes += outcomes
            result.unreadable += [f"uid {o.uid}: {o.failure}" for o in outcomes if o.failure]
            # Only ever forward, and only under the UIDVALIDITY these UIDs belong to.
            SmtpCredential.objects.filter(
                Q(imap_last_uid__isnull=True) | Q(imap_last_uid__lt=batch[-1]),
                pk=credential.pk,
                imap_uidvalidity=validity,
            ).update(imap_last_uid=batch[-1])
            credential.imap_last_uid = batch[-1]
    finally:
        with contextlib.suppress(OSError, imaplib.IMAP4.error):
            client.logout()


def _batch_handle(
    client: imaplib.IMAP4, credential: SmtpCredential, batch: list[int], validity
) -> list[Outcome]:
    """One batch of UIDs: headers and sizes, matching, then the matched messages read
    whole in groups within IMAP_FETCH_MAX_BYTES and kept. Outcomes in UID order; each
    message's failure is its own (`_message_guarded`)."""
    outcomes: list[Outcome] = []
    matched: list[tuple[int, Match, int]] = []  # (uid, match, size)
    headers = _headers_fetch(client, batch)
    for uid, (size, raw) in headers.items():
        found = _message_guarded(
            credential,
            uid,
            lambda uid=uid, raw=raw: message_match(
                credential=credential,
                uid=uid,
                raw=raw,
                fetch_full=lambda: _fetch_full(client, uid),
            ),
        )
        if isinstance(found, Outcome):
            outcomes.append(found)
        else:
            matched.append((uid, found, size))
    del headers
    limit = settings.IMAP_MAX_MESSAGE_BYTES
    for group in _groups_by_bytes(matched, settings.IMAP_FETCH_MAX_BYTES):
        bodies = _fetch(client, [uid for uid, _, _ in group], f"BODY.PEEK[]<0.{limit}>")
        for uid, match, size in group:
            if uid not in bodies:
                continue  # expunged meanwhile
            outcomes.append(
                _reply_keep_guarded(
                    credential=credential,
                    uid=uid,
                    match=match,
                    raw=bodies.pop(uid),
                    validity=validity,
                    cut=size > limit,
                )
            )
        del bodies
    return sorted(outcomes, key=lambda outcome: outcome.uid)


def _message_guarded(credential: SmtpCredential, uid: int, handle):
    """`handle()`: one message's work. Whatever it raises that is not the mailbox's or
    the database's doing is that message's `unreadable` outcome. No transaction here:
    the writes a message makes are each a transaction of their own already (the reply
    and its effects in reply_record's, a bounce in the bounce service's), so a failure
    leaves none half made, and a poll costs no savepoint per message."""
    try:
        return handle()
    except _NOT_THE_MESSAGE:
        raise
    except Exception as exc:  # anything a message can provoke; a poll must go on
        failure = _describe(exc)[:300]
        logger.exception("mailbox %s: message uid %s unreadable: %s", credential.pk, uid, failure)
        return Outcome(uid, UNREADABLE, detail=failure, failure=failure)


def _reply_keep_guarded(*, credential: SmtpCredential, uid: int, match: Match, raw: bytes, **kw):
    """Keep a matched message; when that raises, keep it unparsed (its headers, the
    reason as its defect); when even that raises, it is `unreadable`."""
    outcome = _message_guarded(
        credential,
        uid,
        lambda: reply_keep(credential=credential, uid=uid, match=match, raw=raw, **kw),
    )
    if outcome.kind != UNREADABLE:
        return outcome
    failure = outcome.failure
    kept = _message_guarded(
        credential,
        uid,
        lambda: reply_keep(
            credential=credential,
            uid=uid,
            match=match,
            raw=raw,
            parsed=message_unparsed(raw, reason=failure),
            **kw,
        ),
    )
    kept.failure = failure
    return kept


def message_take(*, credential: SmtpCredential, raw: bytes, fallback_id: str) -> Outcome:
    """One whole message handed to the intake as a poll reads it (a simulator mailbox's
    mail, a message replayed to it: docs/sandbox.md): its header first (at most
    IMAP_MAX_HEADER_BYTES) matched, a delivery report read whole and applied, a matched
    message read (at most IMAP_MAX_MESSAGE_BYTES, `cut` beyond) and kept, each failure
    the message's own outcome as in a poll. `fallback_id` stands in for a missing
    Message-ID (a mailbox's UIDVALIDITY and UID in a poll)."""
    limit = settings.IMAP_MAX_MESSAGE_BYTES
    whole = raw[:limit]
    end = min((i for i in (raw.find(b"\r\n\r\n"), raw.find(b"\n\n")) if i >= 0), default=-1)
    header = raw if end < 0 else raw[: end + (4 if raw[end : end + 4] == b"\r\n\r\n" else 2)]
    header = header[: min(settings.IMAP_MAX_HEADER_BYTES, settings.IMAP_FETCH_MAX_BYTES)]
    found = _message_guarded(
        credential,
        0,
        lambda: message_match(credential=credential, uid=0, raw=header, fetch_full=lambda: whole),
    )
    if isinstance(found, Outcome):
        return found
    return _reply_keep_guarded(
        credential=credential,
        uid=0,
        match=found,
        raw=whole,
        validity=None,
        cut=len(raw) > limit,
        fallback_id=fallback_id,
    )


def _headers_fetch(client: imaplib.IMAP4, batch: list[int]) -> dict[int, tuple[int, bytes]]:
    """{uid: (size, header)} of a batch, in UID order (an expunged UID is absent): each
    header at most IMAP_MAX_HEADER_BYTES (a longer one is read as far as that goes:
    its first lines), fetched in groups of at most IMAP_FETCH_MAX_BYTES together."""
    cap = min(settings.IMAP_MAX_HEADER_BYTES, settings.IMAP_FETCH_MAX_BYTES)
    per_fetch = max(1, settings.IMAP_FETCH_MAX_BYTES // cap)
    found: dict[int, tuple[int, bytes]] = {}
    for start in range(0, len(batch), per_fetch):
        found.update(
            _fetch_sized(
                client, batch[start : start + per_fetch], f"RFC822.SIZE BODY.PEEK[HEADER]<0.{cap}>"
            )
        )
    return {uid: found[uid] for uid in batch if uid in found}


def _fetch_full(client: imaplib.IMAP4, uid: int) -> bytes:
    """The whole message, capped: a delivery report is small; a huge one is not read."""
    limit = settings.IMAP_MAX_MESSAGE_BYTES
    data = _check(client.uid("FETCH", str(uid), f"(BODY.PEEK[]<0.{limit}>)"), "FETCH")
    for entry in data:
        if isinstance(entry, tuple) and len(entry) >= 2:
            return entry[1]
    return b""


def mailboxes_due():
    """Enabled credentials with IMAP settings (the beat task polls each), less OAuth
    mailboxes waiting to be re-authorized (no token would let them in)."""
    return (
        SmtpCredential.objects.filter(disabled_at__isnull=True)
        .exclude(imap_host="")
        .exclude(auth_method=SmtpCredential.AuthMethod.SIMULATOR)
        .exclude(oauth_status=SmtpCredential.OAuthStatus.REAUTHORIZATION_REQUIRED)
    )
