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
from email.message import Message as EmailMessage
from email.utils import parseaddr, parsedate_to_datetime

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import InterfaceError, OperationalError, transaction
from django.db.models import Min, Q
from django.utils import timezone

from config.outbound import OutboundRefused
from outreach.conversations import labels
from outreach.conversations.parse import message_from_bytes_bounded, message_unparsed, text_storable
from outreach.intake.authentication import dmarc_aligned_pass, mailbox_authserv_id
from outreach.intake.replies import received_at_of, reply_record
from outreach.intake.reports import DeliveryReport, delivery_report_parse, is_delivery_report
from outreach.intake.selectors import (
    enrollment_sent_from,
    message_find,
    message_ids_in_header,
    message_ids_known,
)
from outreach.mailboxes.imap import MailboxUnreachable, imap_connect
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Enrollment, Message
from outreach.sending.bounces import enrollment_mark_bounced

logger = logging.getLogger(__name__)

REPLIED = "replied"  # a reply, recorded as the enrollment's reply
KEPT = "kept"  # a further reply in a thread whose reply was already recorded
BOUNCED = "bounced"
AUTO_REPLY = "auto_reply"  # an auto-reply or out-of-office notice, kept, not a reply
UNVERIFIED = "unverified"  # matched by its From alone, not authenticated: kept, changes nothing
UNMATCHED = "unmatched"  # also: a delivery report about another recipient than our message's
IGNORED = "ignored"  # our own copies, temporary delivery reports, other reports, repeats
UNREADABLE = "unreadable"  # raised while read (the detail says what); the poll went past it
KINDS = (REPLIED, KEPT, BOUNCED, AUTO_REPLY, UNVERIFIED, UNMATCHED, IGNORED, UNREADABLE)

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

_DAEMON_LOCALPARTS = {"mailer-daemon", "postmaster"}


@dataclass
class Outcome:
    uid: int
    kind: str
    enrollment_id: str | None = None
    detail: str = ""
    failure: str = ""  # what reading it raised (the message is `unreadable`, or kept unparsed)


@dataclass(frozen=True)
class Match:
    """A message matched to an enrollment, and whether its sender is verified: it names
    a message the service sent, or the receiving server's DMARC passed for its From
    domain (docs/intake.md, "Who may change state by mail")."""

    enrollment: Enrollment
    sender_verified: bool


@dataclass
class PollResult:
    credential_id: str
    outcomes: list[Outcome] = field(default_factory=list)
    error: str = ""
    more: bool = False  # messages left for the next round
    unreadable: list[str] = field(default_factory=list)  # "uid N: what it raised"

    def count(self, kind: str) -> int:
        return sum(1 for o in self.outcomes if o.kind == kind)


# --- classification ----------------------------------------------------------------------


def _address(value: str | None) -> str:
    return parseaddr(str(value or ""))[1].strip().lower()


def message_handle(
    *, credential: SmtpCredential, uid: int, raw: bytes, fetch_full, validity=None
) -> Outcome:
    """Classify one mailbox message and apply it. `raw`: its headers (or all of it);
    `fetch_full()`: the whole message (capped at IMAP_MAX_MESSAGE_BYTES)."""
    matched = message_match(credential=credential, uid=uid, raw=raw, fetch_full=fetch_full)
    if isinstance(matched, Outcome):
        return matched
    return reply_keep(
        credential=credential, uid=uid, match=matched, raw=fetch_full(), validity=validity
    )


def reply_keep(
    *,
    credential: SmtpCredential,
    uid: int,
    match: Match,
    raw: bytes,
    validity,
    cut=False,
    parsed=None,
) -> Outcome:
    """Keep a matched message as a reply (outreach.intake.replies)."""
    enrollment = match.enrollment
    recorded = reply_record(
        credential=credential,
        enrollment=enrollment,
        raw=raw,
        fallback_id=f"imap-{validity or 0}-{uid}@{credential.pk}",
        cut=cut,
        sender_verified=match.sender_verified,
        parsed=parsed,
    )
    if recorded.reply is None:
        return Outcome(uid, IGNORED, str(enrollment.pk), "message already kept")
    if not match.sender_verified:
        detail = "sender not verified, kept, changes nothing"
        if recorded.label:
            detail += f"; label {recorded.label}"
        return Outcome(uid, UNVERIFIED, str(enrollment.pk), detail)
    if recorded.label in (labels.OUT_OF_OFFICE, labels.AUTO_REPLY):
        return Outcome(uid, AUTO_REPLY, str(enrollment.pk), recorded.label)
    if recorded.replied:
        return Outcome(uid, REPLIED, str(enrollment.pk), recorded.label or "reply")
    return Outcome(uid, KEPT, str(enrollment.pk), "reply already recorded; kept in the thread")


def message_match(
    *, credential: SmtpCredential, uid: int, raw: bytes, fetch_full
) -> Match | Outcome:
    """The enrollment a mailbox message answers (a Match that says whether its sender is
    verified), or the Outcome of a message that is not a reply (a delivery report is
    applied here: it needs `fetch_full()`)."""
    message, _ = message_from_bytes_bounded(raw)
    account_id = credential.account_id

    if message.get_content_type() == "multipart/report":
        if not is_delivery_report(message):
            return Outcome(uid, IGNORED, detail="report that is not a delivery status")
        full, _ = message_from_bytes_bounded(fetch_full())
        return _delivery_report_apply(credential, uid, delivery_report_parse(full))

    sender = _address(message.get("From"))
    if sender == credential.from_email.lower() or message_ids_known(
        account_id=account_id, message_ids=[message.get("Message-ID") or ""]
    ):
        return Outcome(uid, IGNORED, detail="our own message")
    if sender.split("@")[0] in _DAEMON_LOCALPARTS:
        return Outcome(uid, IGNORED, detail="mail system notice that is not a delivery report")

    referenced = message_ids_in_header(message.get("In-Reply-To")) + message_ids_in_header(
        message.get("References")
    )
    sent = message_find(account_id=account_id, message_ids=referenced)
    if sent is not None:
        return Match(sent.enrollment, sender_verified=True)
    # The From fallback: anyone can write a From, so it finds the thread but proves
    # nothing unless the receiving server's DMARC passed for that From's domain.
    enrollment = enrollment_sent_from(credential=credential, email=sender)
    if enrollment is None or not _after_first_send(message, enrollment):
        return Outcome(uid, UNMATCHED, detail=f"from {sender or 'unknown'}")
    authserv_id = mailbox_authserv_id(
        imap_authserv_id=credential.imap_authserv_id, imap_host=credential.imap_host
    )
    verified = dmarc_aligned_pass(message, authserv_id=authserv_id)
    return Match(enrollment, sender_verified=verified)


def _delivery_report_apply(
    credential: SmtpCredential, uid: int, report: DeliveryReport | None
) -> Outcome:
    """A permanent failure the report gives for the recipient of the message it names
    bounces that enrollment; a report about anyone else changes nothing."""
    if report is None:
        return Outcome(uid, IGNORED, detail="delivery report, not permanent (no status)")
    permanent = [f for f in report.failures if f.permanent]
    if not permanent:
        status = report.failures[0].status
        return Outcome(uid, IGNORED, detail=f"delivery report, not permanent ({status})")
    sent = message_find(account_id=credential.account_id, message_ids=report.original_message_ids)
    if sent is None:
        return Outcome(uid, UNMATCHED, detail="delivery report for an unknown message")
    failure = report.permanent_failure_of(sent.to_email)
    if failure is None:
        named = ", ".join(r for f in permanent for r in f.recipients) or "no recipient"
        return Outcome(
            uid,
            UNMATCHED,
            str(sent.enrollment_id),
            f"delivery report names {named}, not the message's recipient: not counted",
        )
    changed = enrollment_mark_bounced(
        enrollment=sent.enrollment, reason=failure.reason, credential=sent.credential
    )
    return Outcome(
        uid,
        BOUNCED if changed else IGNORED,
        str(sent.enrollment_id),
        failure.reason if changed else "already bounced",
    )


def _received_at(message: EmailMessage):
    """The message's Date when it is sane (not in the future), else now."""
    try:
        value = parsedate_to_datetime(str(message.get("Date")))
    except (TypeError, ValueError, IndexError):
        value = None
    return received_at_of(value, now=timezone.now())


def _after_first_send(message: EmailMessage, enrollment) -> bool:
    """The From fallback only counts mail written after our first email reached them."""
    first = Message.objects.filter(enrollment=enrollment).aggregate(first=Min("sent_at"))["first"]
    return first is not None and _received_at(message) >= first - timedelta(minutes=5)


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
    """`handle()` (one message's work) in a transaction of its own; whatever it raises
    that is not the mailbox's or the database's doing is that message's `unreadable`
    outcome, its writes rolled back."""
    try:
        with transaction.atomic():
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
        .exclude(oauth_status=SmtpCredential.OAuthStatus.REAUTHORIZATION_REQUIRED)
    )
