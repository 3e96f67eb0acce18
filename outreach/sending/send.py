"""Sending tasks' work: mailboxes' claimed batches, loaded together, each mailbox over
its own SMTP connection (outreach.sending.batch), the mailboxes at once on the process's
sending threads. A slow or hanging server holds only its own mailbox's thread."""

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from uuid import UUID

from django.conf import settings
from django.db import close_old_connections, connection
from django.utils import timezone

from config.crypto import EncryptedTextField
from config.db import connection_release
from outreach.campaigns.state import campaigns_complete_if_done
from outreach.campaigns.variants import variants_assign
from outreach.models.campaigns import Campaign, CampaignStep
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import SendClaim
from outreach.sending.attempts import BatchResult
from outreach.sending.batch import MailboxBatch
from outreach.sending.message import thread_messages

logger = logging.getLogger(__name__)


def batch_send(*, batch_id=None, batch_ids=None, credential_id, clock=timezone.now) -> BatchResult:
    """Send the claims of one mailbox's batches (`batch_id`, or several `batch_ids` of
    one scheduler run) over one connection (module docstring). `clock` gives "now" for
    each step (tests pass a fixed clock)."""
    results = mailboxes_send([(credential_id, list(batch_ids or [batch_id]))], clock=clock)
    return results[0] if results else BatchResult()


def mailboxes_send(groups, *, clock=timezone.now) -> list[BatchResult]:
    """Send the claimed batches of several mailboxes, given as (credential id, its batch
    ids) pairs: loaded together (one query for all their claims), then each mailbox over
    its own connection, the mailboxes at once on the process's sending threads
    (`sending_pool`), so a slow or hanging server holds only its own mailbox. Returns a
    result per mailbox that had claims left to send.

    Inside a caller's transaction (tests) or for one mailbox, the batches run one after
    the other in the calling thread: other threads could not see the caller's rows."""
    batches = batches_load(groups)
    if not batches:
        return []
    try:
        for batch in batches:
            batch.clock = clock
        _run(batches)
    finally:
        # Once for all of them, and only for campaigns where a message may have ended
        # an enrollment (its last step sent, a bounce, a failure): campaigns left
        # without active work are completed.
        ended = set().union(*(batch.ended for batch in batches))
        if ended:
            campaigns_complete_if_done(campaign_ids=ended, at=clock())
    return [batch.result for batch in batches]


def _run(batches: "list[MailboxBatch]") -> None:
    if len(batches) == 1 or connection.in_atomic_block:
        for batch in batches:
            batch.run()
        return
    # The task's thread only waits from here: its database connection goes back to the
    # worker's pool for the sending threads (holding it, a few waiting tasks would take
    # every connection the threads need).
    connection_release()
    futures = [sending_pool().submit(_run_in_pool, batch) for batch in batches]
    failures = [exc for future in futures if (exc := future.exception()) is not None]
    if failures:
        # Each was logged where it happened; the task fails with the first.
        raise failures[0]


def _run_in_pool(batch: "MailboxBatch") -> None:
    try:
        batch.run()
    except Exception:
        logger.exception("the batch of mailbox %s failed", batch.credential.pk)
        raise
    finally:
        # A pool thread outlives the batch: its database connection goes back (the
        # worker's pool), or is closed once unusable or past CONN_MAX_AGE.
        connection_release()
        close_old_connections()


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def sending_pool() -> ThreadPoolExecutor:
    """The process's sending threads: at most SENDING_CONCURRENCY SMTP sessions at once,
    whatever the number of tasks handing them mailboxes."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(
                max_workers=settings.SENDING_CONCURRENCY, thread_name_prefix="sending"
            )
        return _pool


# What a send logs in with (outreach.mailboxes.smtp.smtp_connect): the password, or the
# OAuth access token. The mailbox's other secrets are neither loaded nor decrypted for a
# send (a refresh of the token reads its refresh token itself, and a recorded error
# hides only the secrets that were sent: outreach.mailboxes.secrets).
LOGIN_SECRETS = frozenset({"smtp_password", "oauth_access_token"})
_SECRETS_UNREAD = [
    f"credential__{field.name}"
    for field in SmtpCredential._meta.concrete_fields
    if isinstance(field, EncryptedTextField) and field.name not in LOGIN_SECRETS
]


def batches_load(groups) -> list[MailboxBatch]:
    """The mailboxes' unstarted claims, each mailbox's in order, with what they
    need; mailboxes without any are left out."""
    wanted = {(str(credential_id), str(b)) for credential_id, ids in groups for b in ids}
    # One query for the claims, contacts, campaigns, accounts and mailboxes of every
    # mailbox of the task: a paced mailbox's batch is one message, so what a load
    # costs is shared by the task's mailboxes.
    claims = [
        claim
        for claim in SendClaim.objects.open()
        .filter(
            batch_id__in=[b for _, b in wanted],
            credential_id__in={c for c, _ in wanted},
            sending_at=None,
        )
        .select_related("enrollment__contact", "enrollment__campaign__account", "credential")
        .defer(*_SECRETS_UNREAD)
        .order_by("claimed_at", "pk")
        if (str(claim.credential_id), str(claim.batch_id)) in wanted
    ]
    if not claims:
        return []
    # One object per campaign (with its account) and per mailbox, shared by its claims.
    campaigns: dict[UUID, Campaign] = {}
    by_credential: dict[UUID | None, list[SendClaim]] = {}
    for claim in claims:
        campaign = campaigns.setdefault(claim.enrollment.campaign_id, claim.enrollment.campaign)
        claim.enrollment.campaign = campaign
        mailbox = by_credential.setdefault(claim.credential_id, [])
        if mailbox:
            claim.credential = mailbox[0].credential
        mailbox.append(claim)
    steps: dict = {cid: {} for cid in campaigns}
    for step in CampaignStep.objects.filter(campaign_id__in=list(campaigns)):
        steps[step.campaign_id][step.position] = step
    # Drawn (and stored) before anything is built: a retry sends the same variant.
    drawn = [(c.enrollment, steps[c.enrollment.campaign_id].get(c.step)) for c in claims]
    variants = variants_assign(drawn)
    threads = thread_messages(claims, steps, variants)
    batches = []
    for mailbox in by_credential.values():
        credential = mailbox[0].credential
        assert credential is not None  # filtered by it
        batches.append(MailboxBatch(mailbox, credential, steps, variants, threads))
    return batches
