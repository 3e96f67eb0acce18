"""SMTP delivery of claimed batches: one connection per batch, one mailbox per batch.

For each claim of the batch, in order:
1. mark it started (`SendClaim.sending_at`) with a conditional UPDATE that also checks
   the enrollment is still due, its contact not suppressed and its campaign active --
   otherwise the claim is given back and nothing is sent;
2. run the SMTP transaction (MAIL, RCPT, DATA) on the batch's connection;
3. record the outcome in one transaction:
   - accepted: Message row (its Message-ID), enrollment state (sent, or completed after
     the last step; the next step scheduled by outreach.windows.step_send_at), the
     mailbox's counters, the per-campaign send count, the period's usage +1 (billing)
     and `enrollment.sent`; the claim is deleted;
   - 5xx on RCPT or DATA: a permanent bounce (outreach.bounces.enrollment_mark_bounced);
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
import ssl
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from email.headerregistry import Address
from email.message import EmailMessage
from email.utils import format_datetime, formataddr

from django.conf import settings
from django.db import transaction
from django.db.models import F, Value
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone

from billing.periods import period_bounds
from billing.usage import usage_record_increment
from config.db import connection_release
from config.outbound import GuardedSMTP, GuardedSMTP_SSL, OutboundRefused
from config.worker import stopping
from outreach import oauth, record_sql, tokens
from outreach.bounces import enrollment_mark_bounced, stats_increment
from outreach.enrollments import count, counting, variant_count
from outreach.events import ENROLLMENT_SENT, enrollment_emit, enrollment_event_data
from outreach.mime import (
    SharingHeaderFactory,
    SharingPolicy,
    message_bytes,
    message_bytes_fast,
)
from outreach.models import (
    Campaign,
    CampaignStep,
    Enrollment,
    Message,
    Security,
    SendClaim,
    SmtpCredential,
)
from outreach.rendering import (
    UNSUBSCRIBE_URL,
    contact_values,
    places_variable,
    template_render,
    unsubscribe_footer_html,
    unsubscribe_footer_text,
)
from outreach.scheduler import campaigns_complete_if_done, reservation_release
from outreach.variants import DEFAULT as DEFAULT_VARIANT
from outreach.variants import step_content, stored_letter, variants_assign
from outreach.windows import SendWindow, step_send_at, window_timezone
from webhooks.events import drains_publish

# Fold headers only past RFC 5322's 998-character line limit. The default 78 makes
# Python encode long unstructured headers as RFC 2047 words, which breaks
# List-Unsubscribe: its URLs must stay plain for mail clients to find them.
# Same settings as SMTP.clone(max_line_length=998), with the header sharing of
# outreach.mime (the same bytes, less work per message).
SMTP_POLICY = SharingPolicy(
    linesep="\r\n", max_line_length=998, header_factory=SharingHeaderFactory()
)
SMTPUTF8_POLICY = SMTP_POLICY.clone(utf8=True)

logger = logging.getLogger(__name__)

ERROR_MAX_CHARS = 1000
# A batch stops taking new messages this long before its claims' lease ends (60 s, or a
# quarter of a shorter lease), so no message is in flight when the scheduler may reclaim.
LEASE_MARGIN_SECONDS = 60


def _lease_margin() -> timedelta:
    return timedelta(seconds=min(LEASE_MARGIN_SECONDS, settings.SENDING_LEASE_SECONDS / 4))


# --- failures -------------------------------------------------------------------------------


class MailboxError(Exception):
    """The mailbox cannot send at all (authentication, TLS, sender refused): not the
    recipient's fault, so never a bounce; the batch waits and retries."""


class TemporaryError(Exception):
    """A 4xx reply or a broken connection: this step is retried later."""


class PermanentError(Exception):
    """A 5xx reply to RCPT or DATA: the address bounced."""


class OutcomeUnknown(Exception):
    """The message and its final dot went out, and no reply came (the connection
    dropped, or the reply timed out): the server may have accepted it."""


UNSEEN_REPLY_NOTE = (
    "The SMTP server's reply to this message was never seen (the connection dropped, the "
    "reply timed out, or the worker was lost); it is counted as sent and not sent again "
    "(it could arrive twice)."
)


def smtp_transaction(conn: smtplib.SMTP, sender: str, recipient: str, data: bytes, options):
    """MAIL, RCPT and DATA for one recipient, as smtplib's sendmail runs them, except
    that a reply to the final dot that never comes raises OutcomeUnknown instead of
    looking like a connection that failed before the message was sent."""
    conn.ehlo_or_helo_if_needed()
    mail_options = list(options)
    if conn.does_esmtp and conn.has_extn("size"):
        mail_options.append(f"size={len(data)}")
    code, reply = conn.mail(sender, mail_options)
    if code != 250:
        conn.close() if code == 421 else conn.rset()
        raise smtplib.SMTPSenderRefused(code, reply, sender)
    code, reply = conn.rcpt(recipient)
    if code not in (250, 251):
        conn.close() if code == 421 else conn.rset()
        raise smtplib.SMTPRecipientsRefused({recipient: (code, reply)})
    conn.putcmd("data")
    code, reply = conn.getreply()
    if code != 354:
        raise smtplib.SMTPDataError(code, reply)
    body = smtplib._quote_periods(data)  # the dot-stuffing sendmail uses
    if body[-2:] != b"\r\n":
        body += b"\r\n"
    conn.send(body + b".\r\n")
    try:
        code, reply = conn.getreply()
    except (smtplib.SMTPServerDisconnected, OSError) as exc:
        raise OutcomeUnknown(f"{type(exc).__name__}: {exc}"[:ERROR_MAX_CHARS]) from exc
    if code != 250:
        raise smtplib.SMTPDataError(code, reply)


def _reply_text(code: int, message) -> str:
    if isinstance(message, bytes):
        message = message.decode("utf-8", "replace")
    return f"{code} {message}".strip()[:ERROR_MAX_CHARS]


def _classify(exc: Exception) -> Exception:
    """Map an smtplib failure during one message's transaction to our three kinds."""
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        code, message = next(iter(exc.recipients.values()))
        text = _reply_text(code, message)
        return PermanentError(text) if code >= 500 else TemporaryError(text)
    if isinstance(exc, smtplib.SMTPSenderRefused):
        text = _reply_text(exc.smtp_code, exc.smtp_error)
        if exc.smtp_code >= 500:
            return MailboxError(f"sender refused: {text}")
        return TemporaryError(text)
    if isinstance(exc, smtplib.SMTPServerDisconnected):
        return TemporaryError(f"connection lost: {exc}"[:ERROR_MAX_CHARS])
    if isinstance(exc, smtplib.SMTPResponseException):  # DATA and others
        text = _reply_text(exc.smtp_code, exc.smtp_error)
        return PermanentError(text) if exc.smtp_code >= 500 else TemporaryError(text)
    if isinstance(exc, (OSError, smtplib.SMTPException)):
        return TemporaryError(f"{type(exc).__name__}: {exc}"[:ERROR_MAX_CHARS])
    raise exc


# --- the connection -------------------------------------------------------------------------


def _tls_context() -> ssl.SSLContext:
    context = ssl.create_default_context()
    if settings.SENDING_SMTP_CA_FILE:
        context.load_verify_locations(cafile=settings.SENDING_SMTP_CA_FILE)
    return context


def smtp_connect(credential: SmtpCredential) -> smtplib.SMTP:
    """An authenticated connection per the credential's security mode, with the timeout
    on connect and every command. MailboxError for what retrying soon will not fix
    (authentication, TLS), TemporaryError when the server cannot be reached."""
    timeout = settings.SENDING_SMTP_TIMEOUT_SECONDS
    host, port = credential.smtp_host, credential.smtp_port
    access_token = None
    if credential.uses_oauth:
        # Before connecting: a refresh may wait on the token endpoint. A mailbox that
        # needs re-authorization, or a token endpoint that failed, waits like a mailbox
        # failure (never a bounce, no attempt counted).
        try:
            access_token = oauth.access_token_get(credential=credential)
        except oauth.TokenError as exc:
            raise MailboxError(str(exc)[:ERROR_MAX_CHARS]) from exc
    try:
        # Through the outbound guard: a host resolving to a refused address is a mailbox
        # failure (the batch waits), never a bounce.
        if credential.smtp_security == Security.SSL:
            conn = GuardedSMTP_SSL(host, port, timeout=timeout, context=_tls_context())
        else:
            conn = GuardedSMTP(host, port, timeout=timeout)
    except OutboundRefused as exc:
        raise MailboxError(f"refused: {exc}"[:ERROR_MAX_CHARS]) from exc
    except (ssl.SSLError, ssl.CertificateError) as exc:
        raise MailboxError(f"TLS failed: {exc}"[:ERROR_MAX_CHARS]) from exc
    except (OSError, smtplib.SMTPException) as exc:
        raise TemporaryError(f"cannot connect to {host}:{port}: {exc}"[:ERROR_MAX_CHARS]) from exc
    try:
        conn.ehlo()
        if credential.smtp_security == Security.STARTTLS:
            conn.starttls(context=_tls_context())
            conn.ehlo()
        if access_token is not None:
            response = oauth.xoauth2_string(oauth.oauth_user(credential), access_token)
            # The server's JSON error after a refused token is answered with an empty
            # line (the SASL exchange's end); then it says 535.
            conn.auth(
                "XOAUTH2",
                lambda challenge=None: response if challenge is None else "",
                initial_response_ok=True,
            )
        elif credential.smtp_username:
            conn.login(credential.smtp_username, credential.smtp_password)
        return conn
    except smtplib.SMTPAuthenticationError as exc:
        _close(conn)
        if access_token is not None:
            oauth.access_token_forget(credential=credential)  # refreshed next time
        text = _reply_text(exc.smtp_code, exc.smtp_error)
        raise MailboxError(f"authentication failed: {text}") from exc
    except (smtplib.SMTPNotSupportedError, ssl.SSLError, ssl.CertificateError) as exc:
        _close(conn)
        raise MailboxError(f"{type(exc).__name__}: {exc}"[:ERROR_MAX_CHARS]) from exc
    except smtplib.SMTPResponseException as exc:
        _close(conn)
        if exc.smtp_code >= 500:
            raise MailboxError(_reply_text(exc.smtp_code, exc.smtp_error)) from exc
        raise TemporaryError(_reply_text(exc.smtp_code, exc.smtp_error)) from exc
    except (OSError, smtplib.SMTPException) as exc:
        _close(conn)
        raise TemporaryError(f"{type(exc).__name__}: {exc}"[:ERROR_MAX_CHARS]) from exc


def _close(conn) -> None:
    try:
        conn.quit()
    except (OSError, smtplib.SMTPException):
        with contextlib.suppress(OSError):
            conn.close()


# --- the message ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Outgoing:
    message_id: str  # without brackets
    subject: str
    data: bytes
    to_email: str  # the envelope recipient (domain in IDNA form)
    # A non-ASCII local part can only travel with SMTPUTF8 (RFC 6531).
    needs_smtputf8: bool = False
    variant: str = DEFAULT_VARIANT  # the step's A/B variant it carries


def ascii_address(address: str) -> str | None:
    """The address with its domain in IDNA (ASCII) form, as the envelope needs it; None
    when the local part itself is not ASCII."""
    local, _, domain = address.rpartition("@")
    if not local.isascii():
        return None
    try:
        domain = domain.encode("idna").decode("ascii")
    except UnicodeError:
        return None
    return f"{local}@{domain}"


def _domain(address: str) -> str:
    domain = address.rsplit("@", 1)[-1]
    try:
        return domain.encode("idna").decode("ascii")
    except UnicodeError:
        return domain


def _before_body_end(html: str, fragment: str) -> str:
    """The HTML with `fragment` inserted before its closing body tag (or at its end)."""
    index = html.lower().rfind("</body>")
    if index == -1:
        return html + fragment
    return html[:index] + fragment + html[index:]


def _with_pixel(html: str, pixel_url: str) -> str:
    pixel = f'<img src="{pixel_url}" width="1" height="1" alt="" style="display:none">'
    return _before_body_end(html, pixel)


def message_build(
    *,
    credential: SmtpCredential,
    campaign: Campaign,
    step: CampaignStep,
    enrollment: Enrollment,
    thread: list[Message],
    first_subject: str,
    now: datetime,
    variant: str = DEFAULT_VARIANT,
) -> Outgoing:
    """The email of one step's A/B `variant` (API.md sections 5 and 8). `thread`: the
    enrollment's earlier messages, oldest first; a step with an empty subject replies
    to the last of them."""
    contact = enrollment.contact
    content = step_content(step, variant)
    unsubscribe = tokens.token_make(purpose=tokens.UNSUBSCRIBE, enrollment_id=enrollment.pk)
    base_url = settings.BASE_URL
    unsubscribe_url = f"{base_url}/u/{unsubscribe}"
    values = {**contact_values(contact), UNSUBSCRIBE_URL: unsubscribe_url}
    message_id = f"{uuid.uuid4().hex}@{_domain(credential.from_email)}"

    # Display names lose their line breaks: a name cannot add a header.
    headers = [
        ("From", formataddr((" ".join(credential.from_name.split()), credential.from_email)))
    ]
    name = " ".join(f"{contact.first_name} {contact.last_name}".split())
    recipient = ascii_address(contact.email)
    if recipient is not None:
        headers.append(("To", formataddr((name, recipient))))
    else:  # SMTPUTF8: the header carries the address as UTF-8
        local, _, domain = contact.email.rpartition("@")
        headers.append(("To", Address(display_name=name, username=local, domain=domain)))
    if content.subject.strip():
        subject = template_render(content.subject, values, kind="header")
    else:
        previous = thread[-1].subject if thread else first_subject
        while previous[:4].lower() == "re: ":
            previous = previous[4:]
        subject = f"Re: {previous}"
        if thread:
            headers.append(("In-Reply-To", f"<{thread[-1].message_id}>"))
            headers.append(("References", " ".join(f"<{m.message_id}>" for m in thread)))
    headers += (
        ("Subject", subject),
        ("Date", format_datetime(now)),
        ("Message-ID", f"<{message_id}>"),
        (
            "List-Unsubscribe",
            f"<{unsubscribe_url}>, <mailto:{credential.from_email}?subject=unsubscribe>",
        ),
        ("List-Unsubscribe-Post", "List-Unsubscribe=One-Click"),
        ("X-Auto-Response-Suppress", "OOF, AutoReply"),
    )
    # The footer goes to each part that does not place the link itself.
    footer = campaign.unsubscribe_footer
    text = template_render(content.body_text, values, kind="text")
    if footer and not places_variable(content.body_text, UNSUBSCRIBE_URL):
        text = unsubscribe_footer_text(text, unsubscribe_url)
    html = None
    if content.body_html.strip():
        html = template_render(content.body_html, values, kind="html")
        if footer and not places_variable(content.body_html, UNSUBSCRIBE_URL):
            html = _before_body_end(html, unsubscribe_footer_html(unsubscribe_url))
        if campaign.track_opens:
            token = tokens.token_make(purpose=tokens.OPEN, enrollment_id=enrollment.pk)
            html = _with_pixel(html, f"{base_url}/t/o/{token}.gif")
    # The common case written directly (byte for byte what the email package writes,
    # outreach.mime); anything else, and SMTPUTF8, through the email package.
    data = None
    if recipient is not None:
        data = message_bytes_fast(headers, text, html, policy=SMTP_POLICY)
    if data is None:
        msg = EmailMessage(policy=SMTP_POLICY)
        for header, value in headers:
            msg[header] = value
        msg.set_content(text)
        if html is not None:
            msg.add_alternative(html, subtype="html")
        data = message_bytes(msg, policy=SMTPUTF8_POLICY if recipient is None else SMTP_POLICY)
    return Outgoing(
        message_id=message_id,
        subject=subject,
        data=data,
        to_email=recipient or contact.email,
        needs_smtputf8=recipient is None,
        variant=variant,
    )


# --- recording outcomes ---------------------------------------------------------------------


def retry_delay(attempts_done: int) -> timedelta:
    schedule = settings.SENDING_RETRY_SCHEDULE or [300]
    return timedelta(seconds=schedule[min(attempts_done, len(schedule)) - 1])


def _release_claim(claim: SendClaim, *, now: datetime, next_send_at: datetime | None) -> None:
    """Give the claim and its reservation back; a still-due enrollment is due at
    `next_send_at` (None: leave its next_send_at alone)."""
    with transaction.atomic():
        if SendClaim.objects.filter(pk=claim.pk, batch_id=claim.batch_id).delete()[0]:
            reservation_release(credential_id=claim.credential_id, at=claim.claimed_at)
            if next_send_at is not None:
                Enrollment.objects.filter(pk=claim.pk, status__in=Enrollment.DUE_STATUSES).update(
                    next_send_at=next_send_at, updated_at=now
                )


def _record_sent(
    *,
    claim: SendClaim,
    enrollment: Enrollment,
    campaign: Campaign,
    credential: SmtpCredential,
    steps: dict[int, CampaignStep],
    outgoing: Outgoing,
    now: datetime,
    reply_seen: bool = True,
) -> None:
    """An accepted message (or one whose reply never came, `reply_seen=False`), in one
    transaction: the Message, the enrollment moved on, the counters, the period's
    usage and `enrollment.sent`."""
    next_step = steps.get(claim.step + 1)
    if next_step is not None:
        status, completed_at = Enrollment.Status.SENT, None
        next_send_at = step_send_at(
            after=now,
            delay_minutes=next_step.delay_minutes,
            timezone=window_timezone(
                campaign=campaign, contact_timezone=enrollment.contact.timezone
            ),
            window=SendWindow.from_json(campaign.send_window),
        )
    else:
        status, completed_at, next_send_at = Enrollment.Status.COMPLETED, now, None
    # The claim drew the mailbox's gap from the claim's time; a send that left late must
    # still keep the minimum before the next one.
    pace_floor = (
        now + timedelta(seconds=credential.min_interval_seconds) if credential.is_paced else None
    )
    if reply_seen and record_sql.supported():
        # PostgreSQL, the common case: the same writes in one statement (outreach.record_sql).
        state = {
            "status": status,
            "current_step": claim.step,
            "sent_at": now,
            "next_send_at": next_send_at,
            "completed_at": completed_at,
            "credential_id": credential.pk,
        }
        for name, value in state.items():
            setattr(enrollment, name, value)
        enrollment.campaign = campaign
        rung = record_sql.record_sent(
            account_id=campaign.account_id,
            campaign_id=campaign.pk,
            credential_id=credential.pk,
            enrollment_id=enrollment.pk,
            step=claim.step,
            message_id=outgoing.message_id,
            to_email=outgoing.to_email,
            subject=outgoing.subject,
            variant=outgoing.variant,
            now=now,
            status=status,
            next_send_at=next_send_at,
            completed_at=completed_at,
            pace_floor=pace_floor,
            period=period_bounds(campaign.account, now),
            event_type=ENROLLMENT_SENT,
            event_data=enrollment_event_data(enrollment, event_type=ENROLLMENT_SENT),
        )
        if rung is not None:
            if rung:
                transaction.on_commit(lambda: drains_publish(webhook_ids=rung), robust=True)
            return
        # The statement did not apply (nothing written): the ORM path does it all.
    with transaction.atomic(), counting():
        Message.objects.create(
            account_id=campaign.account_id,
            enrollment_id=enrollment.pk,
            credential_id=credential.pk,
            step=claim.step,
            message_id=outgoing.message_id,
            to_email=outgoing.to_email,
            subject=outgoing.subject,
            variant=outgoing.variant,
            sent_at=now,
            reply_seen=reply_seen,
        )
        variant_count(campaign.pk, claim.step, outgoing.variant, sent=1)
        # Intake may have changed the enrollment since the claim (a reply, an
        # unsubscribe): then the message is recorded, the sequence is not moved.
        moved = Enrollment.objects.filter(
            pk=enrollment.pk, status__in=Enrollment.DUE_STATUSES
        ).update(
            status=status,
            current_step=claim.step,
            sent_at=now,
            next_send_at=next_send_at,
            completed_at=completed_at,
            credential_id=credential.pk,
            send_attempts=0,
            last_error="" if reply_seen else UNSEEN_REPLY_NOTE,
            updated_at=now,
        )
        SendClaim.objects.filter(pk=claim.pk).delete()
        credential_changes = {"sent_count": F("sent_count") + 1}
        if pace_floor is not None:
            credential_changes["next_send_earliest_at"] = Greatest(
                Coalesce("next_send_earliest_at", Value(pace_floor)), Value(pace_floor)
            )
        SmtpCredential.objects.filter(pk=credential.pk).update(**credential_changes)
        stats_increment(credential_id=credential.pk, campaign_id=campaign.pk, sends=1)
        usage_record_increment(account=campaign.account, at=now)
        if moved:
            if claim.step == 1:
                count(campaign.pk, sent=1)
            enrollment.status, enrollment.current_step = status, claim.step
            enrollment.sent_at, enrollment.next_send_at = now, next_send_at
            enrollment.completed_at, enrollment.credential_id = completed_at, credential.pk
        else:
            enrollment.refresh_from_db()
        enrollment.campaign = campaign
        enrollment_emit(enrollment=enrollment, event_type=ENROLLMENT_SENT)


def _record_temporary(*, claim: SendClaim, enrollment: Enrollment, error: str, now) -> None:
    attempts = enrollment.send_attempts + 1
    with transaction.atomic():
        if not SendClaim.objects.filter(pk=claim.pk, batch_id=claim.batch_id).delete()[0]:
            return
        reservation_release(credential_id=claim.credential_id, at=claim.claimed_at)
        rows = Enrollment.objects.filter(pk=enrollment.pk, status__in=Enrollment.DUE_STATUSES)
        if attempts >= settings.SENDING_MAX_ATTEMPTS:
            rows.update(
                status=Enrollment.Status.FAILED,
                next_send_at=None,
                send_attempts=attempts,
                last_error=error,
                updated_at=now,
            )
        else:
            rows.update(
                next_send_at=now + retry_delay(attempts),
                send_attempts=attempts,
                last_error=error,
                updated_at=now,
            )


def _record_undeliverable(*, claim: SendClaim, enrollment, error: str, now) -> None:
    """No retry can help (the address cannot be expressed to this server): failed."""
    with transaction.atomic():
        if SendClaim.objects.filter(pk=claim.pk, batch_id=claim.batch_id).delete()[0]:
            reservation_release(credential_id=claim.credential_id, at=claim.claimed_at)
            Enrollment.objects.filter(pk=enrollment.pk, status__in=Enrollment.DUE_STATUSES).update(
                status=Enrollment.Status.FAILED, next_send_at=None, last_error=error, updated_at=now
            )


def _record_bounce(*, claim: SendClaim, enrollment, credential, error: str, now) -> None:
    with transaction.atomic():
        SendClaim.objects.filter(pk=claim.pk).delete()
        # The reservation stays used: the server judged an attempt from this mailbox.
        enrollment_mark_bounced(
            enrollment=enrollment,
            reason=error,
            at=now,
            credential=credential,
            rejected_at_send=True,
        )


def credential_error_record(*, credential: SmtpCredential, error: str, now: datetime) -> None:
    SmtpCredential.objects.filter(pk=credential.pk).update(
        last_error=error[:ERROR_MAX_CHARS], last_error_at=now
    )
    credential.last_error, credential.last_error_at = error, now


# --- the batch ------------------------------------------------------------------------------


def _mark_started(claim: SendClaim, outgoing: Outgoing, now: datetime) -> bool:
    """Mark the claim started, with the message it is about to send, if its enrollment
    is still due, its contact not suppressed and its campaign active."""
    if record_sql.supported():
        return record_sql.mark_started(
            enrollment_id=claim.pk,
            batch_id=claim.batch_id,
            now=now,
            message_id=outgoing.message_id,
            subject=outgoing.subject[:998],
            to_email=outgoing.to_email[:254],
        )
    return bool(
        SendClaim.objects.filter(
            pk=claim.pk,
            batch_id=claim.batch_id,
            sending_at__isnull=True,
            enrollment__status__in=Enrollment.DUE_STATUSES,
            enrollment__contact__unsubscribed_at__isnull=True,
            enrollment__contact__bounced_at__isnull=True,
            enrollment__campaign__status=Campaign.Status.ACTIVE,
        ).update(
            sending_at=now,
            message_id=outgoing.message_id,
            subject=outgoing.subject[:998],
            to_email=outgoing.to_email[:254],
        )
    )


def claims_interrupted_record(*, claims: list[SendClaim]) -> int:
    """Claims marked started whose worker was lost (their lease lapsed): the message
    may have reached the server. Each is recorded as sent, as it was built, with its
    reply unseen: the sequence goes on, and the step is never sent again. Claims
    started before their message was kept (none since this field exists) end failed,
    as they used to. Returns how many were recorded as sent."""
    recorded = 0
    legacy = [c.pk for c in claims if not c.message_id]
    if legacy:
        from outreach.scheduler import INTERRUPTED_ERROR

        Enrollment.objects.filter(pk__in=legacy, status__in=Enrollment.DUE_STATUSES).update(
            status=Enrollment.Status.FAILED, next_send_at=None, last_error=INTERRUPTED_ERROR
        )
        SendClaim.objects.filter(pk__in=legacy).delete()
    claims = [c for c in claims if c.message_id]
    if not claims:
        return 0
    enrollments = Enrollment.objects.select_related("contact").in_bulk([c.pk for c in claims])
    campaign_ids = {e.campaign_id for e in enrollments.values()}
    campaigns = Campaign.objects.select_related("account").in_bulk(campaign_ids)
    steps: dict = {cid: {} for cid in campaign_ids}
    for step in CampaignStep.objects.filter(campaign_id__in=campaign_ids):
        steps[step.campaign_id][step.position] = step
    credentials = SmtpCredential.objects.in_bulk({c.credential_id for c in claims})
    for claim in claims:
        enrollment = enrollments[claim.pk]
        campaign = campaigns[enrollment.campaign_id]
        _record_sent(
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
            ),
            now=claim.sending_at,
            reply_seen=False,
        )
        recorded += 1
    logger.warning(
        "%d sends interrupted by a lost worker: recorded as sent, reply unseen", recorded
    )
    return recorded


@dataclass
class BatchResult:
    sent: int = 0
    bounced: int = 0
    retried: int = 0
    failed: int = 0
    skipped: int = 0
    mailbox_error: str = ""


def batch_send(*, batch_id=None, batch_ids=None, credential_id, clock=timezone.now) -> BatchResult:
    """Send the claims of one mailbox's batches (`batch_id`, or several `batch_ids` of
    one scheduler run) over one connection (module docstring). `clock` gives "now" for
    each step (tests pass a fixed clock)."""
    result = BatchResult()
    batch_ids = list(batch_ids or [batch_id])
    claims = list(
        SendClaim.objects.filter(
            batch_id__in=batch_ids, credential_id=credential_id, sending_at=None
        )
        .select_related("enrollment__contact")
        .order_by("claimed_at", "pk")
    )
    if not claims:
        return result
    credential = SmtpCredential.objects.get(pk=credential_id)
    # A batch's claims share one mailbox and few campaigns: each campaign (with its
    # account) is loaded once and shared by its enrollments.
    campaign_ids = {c.enrollment.campaign_id for c in claims}
    campaigns = Campaign.objects.select_related("account").in_bulk(campaign_ids)
    for claim in claims:
        claim.enrollment.campaign = campaigns[claim.enrollment.campaign_id]
    steps: dict = {cid: {} for cid in campaign_ids}
    for step in CampaignStep.objects.filter(campaign_id__in=campaign_ids):
        steps[step.campaign_id][step.position] = step
    # Drawn (and stored) before anything is built: a retry sends the same variant.
    variants = variants_assign(
        [(c.enrollment, steps[c.enrollment.campaign_id].get(c.step)) for c in claims]
    )
    # Earlier messages only matter to a reply (a variant with an empty subject).
    threads: dict = {c.pk: [] for c in claims}
    replies = [
        c.pk
        for c in claims
        if _is_reply(steps[c.enrollment.campaign_id].get(c.step), variants[c.pk])
    ]
    if replies:
        for message in Message.objects.filter(enrollment_id__in=replies).order_by(
            "step", "sent_at"
        ):
            threads[message.enrollment_id].append(message)

    conn = None
    try:
        for index, claim in enumerate(claims):
            now = clock()
            enrollment = claim.enrollment
            campaign = enrollment.campaign
            step = steps[campaign.pk].get(claim.step)
            if stopping.is_set() or now >= claim.lease_until - _lease_margin():
                # The worker is shutting down, or the lease is nearly over (the
                # scheduler may hand these claims to another batch any moment): give
                # the rest back, due at once, rather than race it.
                for rest in claims[index:]:
                    _release_claim(rest, now=now, next_send_at=now)
                    result.skipped += 1
                return result
            if credential.disabled_at is not None or step is None:
                # Disabled by this batch's bounces, or the step was removed: the
                # scheduler decides again (another mailbox, or completion).
                _release_claim(claim, now=now, next_send_at=now)
                result.skipped += 1
                continue
            if conn is None:
                connection_release()  # no database connection held while connecting
                try:
                    conn = smtp_connect(credential)
                except MailboxError as exc:
                    return _batch_abandon(claims[index:], credential, str(exc), now, result)
                except TemporaryError as exc:
                    credential_error_record(credential=credential, error=str(exc), now=now)
                    for rest in claims[index:]:
                        _record_temporary(
                            claim=rest, enrollment=rest.enrollment, error=str(exc), now=now
                        )
                        result.retried += 1
                    return result
                if credential.last_error:
                    # The mailbox works again: its error is history.
                    SmtpCredential.objects.filter(pk=credential.pk).update(
                        last_error="", last_error_at=None
                    )
                    credential.last_error = ""
            outgoing = _build(
                claim, credential, campaign, step, variants[claim.pk], steps, threads, now
            )
            if isinstance(outgoing, Exception):
                exc = outgoing
                # Retrying cannot fix it, and it must not crash every batch it lands in.
                logger.error("cannot build the message of enrollment %s", claim.pk, exc_info=exc)
                _record_undeliverable(
                    claim=claim,
                    enrollment=enrollment,
                    error=f"The message could not be built: {type(exc).__name__}: {exc}"[
                        :ERROR_MAX_CHARS
                    ],
                    now=now,
                )
                result.failed += 1
                continue
            if not _mark_started(claim, outgoing, now):
                _release_claim(claim, now=now, next_send_at=now)
                result.skipped += 1
                continue
            options: tuple = ()
            if outgoing.needs_smtputf8:
                if not conn.has_extn("smtputf8"):
                    _record_undeliverable(
                        claim=claim,
                        enrollment=enrollment,
                        error="The address has a non-ASCII local part and the SMTP server "
                        "does not offer SMTPUTF8.",
                        now=now,
                    )
                    result.failed += 1
                    continue
                options = ("SMTPUTF8",)
            connection_release()  # the SMTP transaction holds no database connection
            reply_seen = True
            try:
                smtp_transaction(
                    conn, credential.from_email, outgoing.to_email, outgoing.data, options
                )
            except OutcomeUnknown as exc:
                # The whole message went out; whether the server kept it is unknown.
                # Sending it again could deliver it twice: it counts as sent.
                logger.warning("enrollment %s: no reply to the message: %s", claim.pk, exc)
                reply_seen = False
                with contextlib.suppress(OSError):
                    conn.close()  # no QUIT: a server that did not answer will not now
                conn = None
            except Exception as exc:  # noqa: BLE001 - classified below, unknown ones re-raised
                failure = _classify(exc)
                if isinstance(failure, PermanentError):
                    _record_bounce(
                        claim=claim,
                        enrollment=enrollment,
                        credential=credential,
                        error=str(failure),
                        now=now,
                    )
                    credential.refresh_from_db(fields=["disabled_at"])
                    result.bounced += 1
                elif isinstance(failure, MailboxError):
                    return _batch_abandon(claims[index:], credential, str(failure), now, result)
                else:
                    _record_temporary(
                        claim=claim, enrollment=enrollment, error=str(failure), now=now
                    )
                    result.retried += 1
                    if isinstance(exc, (smtplib.SMTPServerDisconnected, OSError)):
                        _close(conn)
                        conn = None  # reconnect for the next message
                continue
            # Recorded (committed) before the next MAIL FROM on this connection.
            _record_sent(
                claim=claim,
                enrollment=enrollment,
                campaign=campaign,
                credential=credential,
                steps=steps[campaign.pk],
                outgoing=outgoing,
                now=now,
                reply_seen=reply_seen,
            )
            result.sent += 1
    finally:
        if conn is not None:
            connection_release()
            _close(conn)
        # Once per batch rather than per message: campaigns left without active work.
        campaigns_complete_if_done(campaign_ids=campaign_ids, at=clock())
    return result


def _is_reply(step: CampaignStep | None, variant: str) -> bool:
    """Whether the step variant's message replies in the thread (message_build: empty
    subject)."""
    return step is not None and not step_content(step, variant).subject.strip()


def _build(claim, credential, campaign, step, variant, steps, threads, now) -> Outgoing | Exception:
    """The claim's message, or what prevented building it (one bad row must not stop
    the batch)."""
    thread = threads[claim.pk]
    enrollment = claim.enrollment
    try:
        return message_build(
            credential=credential,
            campaign=campaign,
            step=step,
            enrollment=enrollment,
            thread=thread,
            # Only a reply without an earlier message needs it.
            first_subject=_first_subject(steps[campaign.pk], enrollment)
            if _is_reply(step, variant) and not thread
            else "",
            now=now,
            variant=variant,
        )
    except Exception as exc:  # noqa: BLE001 - reported by the caller, per claim
        return exc


def _first_subject(steps: dict[int, CampaignStep], enrollment: Enrollment) -> str:
    """The subject step 1 had for this enrollment (its variant's)."""
    first = steps.get(1)
    if first is None:
        return ""
    subject = step_content(first, stored_letter(enrollment, 1)).subject
    return template_render(subject, contact_values(enrollment.contact), kind="header")


def _batch_abandon(claims, credential, error: str, now, result: BatchResult) -> BatchResult:
    """The mailbox failed: record it, give every remaining claim back to be tried after
    SENDING_CREDENTIAL_RETRY_SECONDS, without counting an attempt against anyone."""
    credential_error_record(credential=credential, error=error, now=now)
    later = now + timedelta(seconds=settings.SENDING_CREDENTIAL_RETRY_SECONDS)
    for claim in claims:
        _release_claim(claim, now=now, next_send_at=later)
    result.mailbox_error = error
    logger.warning("mailbox %s cannot send: %s", credential.pk, error)
    return result
