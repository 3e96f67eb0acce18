"""SMTP delivery of claimed batches: one connection per batch, one mailbox per batch.

For each claim of the batch, in order:
1. mark it started (`SendClaim.sending_at`) with a conditional UPDATE that also checks
   the enrollment is still due, its contact not suppressed and its campaign active --
   otherwise the claim is given back and nothing is sent;
2. run the SMTP transaction (MAIL, RCPT, DATA) on the batch's connection;
3. record the outcome in one transaction:
   - accepted: Message row (its Message-ID), enrollment state (sent, or completed after
     the last step; the next step scheduled by outreach.campaigns.windows.step_send_at), the
     mailbox's counters, the per-campaign send count, the period's usage +1 (billing)
     and `enrollment.sent`; the claim is deleted;
   - 5xx on RCPT or DATA: a permanent bounce (outreach.intake.bounces.enrollment_mark_bounced);
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
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from config.db import connection_release
from config.worker import stopping
from outreach.campaigns.models import Campaign, CampaignStep
from outreach.campaigns.rendering import contact_values, template_render
from outreach.campaigns.state import campaigns_complete_if_done
from outreach.campaigns.variants import step_content, stored_letter, variants_assign
from outreach.mailboxes.models import SmtpCredential
from outreach.sending.message import Outgoing, message_build
from outreach.sending.models import Enrollment, Message, SendClaim
from outreach.sending.record import (
    bounce_record,
    claim_mark_started,
    claim_release,
    credential_error_record,
    sent_record,
    temporary_record,
    undeliverable_record,
)
from outreach.sending.smtp import (
    ERROR_MAX_CHARS,
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


# A batch stops taking new messages this long before its claims' lease ends (60 s, or a
# quarter of a shorter lease), so no message is in flight when the scheduler may reclaim.
LEASE_MARGIN_SECONDS = 60


def _lease_margin() -> timedelta:
    return timedelta(seconds=min(LEASE_MARGIN_SECONDS, settings.SENDING_LEASE_SECONDS / 4))


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
                    claim_release(rest, now=now, next_send_at=now)
                    result.skipped += 1
                return result
            if credential.disabled_at is not None or step is None:
                # Disabled by this batch's bounces, or the step was removed: the
                # scheduler decides again (another mailbox, or completion).
                claim_release(claim, now=now, next_send_at=now)
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
                        temporary_record(
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
                undeliverable_record(
                    claim=claim,
                    enrollment=enrollment,
                    error=f"The message could not be built: {type(exc).__name__}: {exc}"[
                        :ERROR_MAX_CHARS
                    ],
                    now=now,
                )
                result.failed += 1
                continue
            if not claim_mark_started(claim, outgoing, now):
                claim_release(claim, now=now, next_send_at=now)
                result.skipped += 1
                continue
            options: tuple = ()
            if outgoing.needs_smtputf8:
                if not conn.has_extn("smtputf8"):
                    undeliverable_record(
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
                failure = smtp_error_classify(exc)
                if isinstance(failure, PermanentError):
                    bounce_record(
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
                    temporary_record(
                        claim=claim, enrollment=enrollment, error=str(failure), now=now
                    )
                    result.retried += 1
                    if isinstance(exc, (smtplib.SMTPServerDisconnected, OSError)):
                        smtp_close(conn)
                        conn = None  # reconnect for the next message
                continue
            # Recorded (committed) before the next MAIL FROM on this connection.
            sent_record(
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
            smtp_close(conn)
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
        claim_release(claim, now=now, next_send_at=later)
    result.mailbox_error = error
    logger.warning("mailbox %s cannot send: %s", credential.pk, error)
    return result
