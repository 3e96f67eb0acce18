"""The send scheduler: turns due enrollments into claimed batches per mailbox.

Beat runs `schedule_run()` every SENDING_SCHEDULE_INTERVAL_SECONDS. Each run, in order:

1. recovers the claims of dead workers whose lease lapsed (`claims_recover`);
2. ends due enrollments whose contact became suppressed meanwhile;
3. claims due enrollments (status scheduled/sent, next_send_at <= now, campaign active,
   contact not suppressed, no open claim) in transactions of SENDING_BATCH_SIZE:
   `SELECT ... FOR UPDATE SKIP LOCKED`, so several schedulers never take the same row.
   The claim is a SendClaim row, at most one open per enrollment (a partial unique
   index): it alone keeps the enrollment out of later scans while it is in flight (its
   next_send_at stays the time it was due), and a scheduler whose scan read the
   enrollment before another's claim committed fails on that index and rolls back (the
   lost race). Per enrollment it decides:
   - the contact's address is on the account's blocklist: stopped (`blocked`);
   - no step left (steps were removed): completed;
   - the campaign's send window is closed now (in the contact's time zone when the
     campaign sends in contact time zones): next_send_at = the next opening;
   - the mailbox: the thread's credential when it has one that is still enabled and in
     the campaign (a thread never changes mailbox while it can be sent from), otherwise
     the enabled credential of the campaign with the most room left today (rotation);
     none with room under its daily_limit (UTC day): next_send_at = the next UTC
     midnight, then the window's next opening; OAuth mailboxes waiting to be
     re-authorized are left out, and when no other is left next_send_at moves
     SENDING_CREDENTIAL_RETRY_SECONDS on;
   - a campaign with require_authenticated_domain gives no claim to a mailbox whose From
     domain check has an error (outreach.domains); with no other mailbox left, the
     enrollment waits SENDING_CREDENTIAL_RETRY_SECONDS, as for a re-authorization;
   - a campaign without any enabled credential is paused (all_credentials_disabled);
   - a paced mailbox (max_interval_seconds > 0) whose next_send_earliest_at is still
     ahead gets nothing: its enrollments stay due, untouched, and are not even read
     until it may send (the scan leaves them out in SQL);
   - otherwise a claim (the enrollment row is not written), a unit of the mailbox's
     daily limit is reserved (daily_sent_count counts reserved and sent sends), and a
     paced mailbox's next_send_earliest_at moves a random gap (drawn from its [min, max]
     interval) ahead, so it gets at most one claim per run;
   - a recipient domain cap in force (the campaign's, or the account's default) whose
     day's count is reached: next_send_at = the next UTC midnight, then the window's
     next opening; a claim reserves a unit of the count (outreach.domain_cap);
4. after commit, queues one `outreach.tasks.send_batch` per (claim batch, mailbox): one
   SMTP connection carries the batch. A paced mailbox's task is queued as soon as its
   claim's transaction commits; an unpaced mailbox's once the whole run has (it may get
   claims in several transactions of one run, all sent over one connection).

All waits are next_send_at values in the database; nothing waits on the broker. `now` is
injectable, so tests drive the clock.
"""

# Long: the scheduler's decisions are one flow (the module docstring); what is not a
# decision lives beside it (recovery.py, mailboxes.pace, domain_cap, blocklist).

import functools
import logging
import uuid
from collections import Counter, defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, IntegrityError, connection, connections, transaction
from django.db.models import Case, F, Q, Value, When
from django.utils import timezone

from outreach.blocklist.selectors import blocked_addresses
from outreach.campaigns.state import campaigns_complete_if_done, campaigns_pause_if_unsendable
from outreach.campaigns.windows import SendWindow, send_window_next_open, window_timezone
from outreach.domain_cap.counts import cap_turn, caps_lock, counts_reserve
from outreach.domains.selectors import credentials_unauthenticated
from outreach.enrollments import enrollments_complete
from outreach.mailboxes.pace import (
    daily_used,
    next_utc_midnight,
    pace_gap,
    paced_until,
    room_today,
    utc_day,
)
from outreach.models.campaigns import Campaign, CampaignStep
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Enrollment, SendClaim
from outreach.sending.blocked import blocked_stop
from outreach.sending.recovery import claims_recover, suppressed_end
from outreach.sending.tasks import send_batch

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Batch:
    """Claims handed to one sending task: all for one mailbox."""

    batch_id: uuid.UUID
    credential_id: uuid.UUID
    size: int
    # The mailbox is paced: this run gives it no other claim, so its task may be queued
    # as soon as this batch's transaction commits.
    paced: bool = False


# --- 3. claims ------------------------------------------------------------------------------


class _LostRace(Exception):
    """Another scheduler claimed an enrollment this one selected: its claim committed
    after this scan's snapshot and before this transaction locked the row, so the scan
    did not see it (the lock alone, released at its commit, is no change of the row)."""


# The partial unique index of open claims (outreach.models.sending.SendClaim).
_OPEN_CLAIM_UNIQUE = "sendclaim_open_unique"


def _due_queryset(now: datetime):
    return Enrollment.objects.not_in_flight().filter(
        status__in=Enrollment.DUE_STATUSES,
        next_send_at__lte=now,
        campaign__status=Campaign.Status.ACTIVE,
        contact__unsubscribed_at__isnull=True,
        contact__bounced_at__isnull=True,
    )


def _mailbox_free(prefix: str, *, now: datetime, busy) -> Q:
    """The mailbox at `prefix` (a path to an SmtpCredential) is enabled, not paced past
    `now` (as paced_until says) and not still sending an earlier run's claims."""
    free = Q(**{f"{prefix}disabled_at__isnull": True}) & (
        Q(**{f"{prefix}next_send_earliest_at__isnull": True})
        | Q(**{f"{prefix}next_send_earliest_at__lte": now})
        | Q(**{f"{prefix}max_interval_seconds": 0})
    )
    if busy:
        free &= ~Q(**{f"{prefix}id__in": busy})
    return free


def _examinable(*, now: datetime, busy) -> Q:
    """Due enrollments worth examining this run: the thread's mailbox may send now, or,
    for a thread without a usable mailbox (new, or its mailbox disabled), the campaign
    has a mailbox that may, or none enabled at all (the campaign is paused below).
    Enrollments waiting for a paced or busy mailbox are left out here, in SQL, so a
    backlog behind one mailbox never fills a run's scan (SENDING_MAX_PER_TICK).

    The free mailboxes and the campaigns they serve are read first, by themselves, and
    the scan gets them as constant lists (hashed by PostgreSQL): no subquery per due row,
    whatever the planner believes of how many rows are due. (Correlated subqueries
    here were planned per row when the statistics said few rows were due, and a run over
    a fleet of thousands of mailboxes took minutes: bench/README.md, "Fleet".)"""
    free_ids = list(
        SmtpCredential.objects.filter(_mailbox_free("", now=now, busy=busy)).values_list(
            "pk", flat=True
        )
    )
    links = Campaign.credentials.through.objects
    serving = list(
        links.filter(smtpcredential_id__in=free_ids)
        .values_list("campaign_id", flat=True)
        .distinct()
    )
    # Active campaigns without any enabled mailbox: examined so that they are paused.
    unsendable = list(
        Campaign.objects.filter(status=Campaign.Status.ACTIVE)
        .exclude(
            pk__in=links.filter(smtpcredential__disabled_at__isnull=True).values("campaign_id")
        )
        .values_list("pk", flat=True)
    )
    rotating = Q(credential__isnull=True) | Q(credential__disabled_at__isnull=False)
    return Q(credential_id__in=free_ids) | (
        rotating & (Q(campaign_id__in=serving) | Q(campaign_id__in=unsendable))
    )


@dataclass
class _Plan:
    complete: list = field(default_factory=list)  # enrollments without a step left
    defer: dict = field(default_factory=lambda: defaultdict(list))  # when -> enrollment ids
    claims: list = field(default_factory=list)  # (enrollment, credential id, step)
    pause: set = field(default_factory=set)  # campaign ids without an enabled credential
    paced: dict = field(default_factory=dict)  # credential id -> its new next_send_earliest_at
    blocked: list = field(default_factory=list)  # enrollments whose address is blocked
    # enrollment id -> the recipient domain count its claim reserves a unit of
    domain_counts: dict = field(default_factory=dict)


def _claim_once(*, now: datetime, batch_size: int, busy=frozenset()) -> tuple[list[Batch], int]:
    """One transaction: select, decide, write. Returns (batches, enrollments examined).
    Enrollments whose thread is on a `busy` mailbox wait for a later run."""
    with transaction.atomic():
        due = (
            _due_queryset(now)
            .filter(_examinable(now=now, busy=busy))
            .annotate(
                contact_timezone=F("contact__timezone"), contact_email=F("contact__email_lower")
            )
            .order_by("next_send_at")
            .select_for_update(skip_locked=True, of=("self",))
        )
        enrollments = list(
            due.only(
                "id", "campaign_id", "contact_id", "current_step", "credential_id", "next_send_at"
            )[:batch_size]
        )
        if not enrollments:
            return [], 0
        plan = _decide(enrollments, now=now, busy=busy)
        batches = _write(plan, now=now)
    return batches, len(enrollments)


def _decide(enrollments: list[Enrollment], *, now: datetime, busy=frozenset()) -> _Plan:
    """Per due enrollment: complete, defer, pause its campaign, or claim (step 3 above)."""
    # Long: one decision per enrollment in the documented order (step 3 above), read top
    # to bottom; the rules it applies live in pace, domain_cap and blocklist.
    campaigns, positions, linked = _campaigns_read({e.campaign_id for e in enrollments})
    enabled_ids, unauthorized, credentials = _credentials_lock(linked, now=now, busy=busy)
    account_of = {e.pk: campaigns[e.campaign_id].account_id for e in enrollments}
    blocked = blocked_addresses((account_of[e.pk], e.contact_email) for e in enrollments)  # type: ignore[attr-defined]  # annotated
    domain_caps = caps_lock(
        ((e.pk, campaigns[e.campaign_id], e.contact_email) for e in enrollments),  # type: ignore[attr-defined]  # annotated
        day=utc_day(now),
    )
    # Mailboxes held by require_authenticated_domain (read only when a campaign asks).
    unauthenticated = credentials_unauthenticated(
        credential_ids=[
            pk for c in campaigns.values() if c.require_authenticated_domain for pk in linked[c.pk]
        ]
    )
    today = utc_day(now)
    room = {pk: room_today(c, today) for pk, c in credentials.items()}
    # Read under the rows' locks: a paced mailbox whose next send is still ahead (set by
    # another run, or by a claim earlier in this one) gets no claim.
    paced = {pk for pk, c in credentials.items() if paced_until(c, now)}
    window_open_at: dict = {}
    # Looked at again then (a re-authorization does not wake them; they wait this long).
    reauthorization_wait = now + timedelta(seconds=settings.SENDING_CREDENTIAL_RETRY_SECONDS)
    # Per campaign, once: its enabled mailboxes (link order), and those of them a claim
    # may go to in this transaction (locked, so free; authorized; authenticated when
    # the campaign asks). A campaign may have thousands of mailboxes, of which a few are
    # free at a time: the per-enrollment choice below looks at those few.
    enabled_of: dict = {}
    usable_of: dict = {}
    for campaign in campaigns.values():
        enabled = [pk for pk in linked[campaign.pk] if pk in enabled_ids]
        enabled_of[campaign.pk] = (enabled, set(enabled))
        usable_of[campaign.pk] = [
            pk
            for pk in enabled
            if pk in credentials
            and pk not in busy
            and pk not in unauthorized
            and credentials[pk].disabled_at is None
            and not (campaign.require_authenticated_domain and pk in unauthenticated)
        ]
    plan = _Plan()
    for enrollment in enrollments:
        campaign = campaigns[enrollment.campaign_id]
        if (account_of[enrollment.pk], enrollment.contact_email) in blocked:  # type: ignore[attr-defined]  # annotated
            plan.blocked.append(enrollment)
            continue
        step = enrollment.current_step + 1
        if step not in positions[campaign.pk]:
            plan.complete.append(enrollment)
            continue
        window = SendWindow.from_json(campaign.send_window)
        zone = window_timezone(campaign=campaign, contact_timezone=enrollment.contact_timezone)  # type: ignore[attr-defined]  # annotated
        key = (campaign.pk, zone)
        if key not in window_open_at:
            window_open_at[key] = send_window_next_open(now, timezone=zone, window=window)
        if window_open_at[key] > now:
            plan.defer[window_open_at[key]].append(enrollment.pk)
            continue
        enabled, enabled_set = enabled_of[campaign.pk]
        if not enabled:
            plan.pause.add(campaign.pk)
            continue
        # The thread keeps its mailbox; a new thread (or one whose mailbox is gone) rotates.
        thread = enrollment.credential_id
        on_thread = thread in enabled_set
        if _reauthorization_only(
            [thread] if on_thread else enabled, campaign, unauthenticated, unauthorized
        ):
            plan.defer[reauthorization_wait].append(enrollment.pk)
            continue
        usable = usable_of[campaign.pk]
        if on_thread:
            usable = [thread] if thread in usable else []
        candidates = [pk for pk in usable if pk not in paced]
        if not candidates:
            # Its mailboxes are all still sending, paced, or held for a moment: a later run.
            continue
        chosen = max(candidates, key=lambda pk: room[pk])  # first in link order on a tie
        if room[chosen] <= 0:
            tomorrow = send_window_next_open(next_utc_midnight(now), timezone=zone, window=window)
            plan.defer[tomorrow].append(enrollment.pk)
            continue
        turn = cap_turn(domain_caps.get(enrollment.pk))
        if turn is None:  # its domain's count is held by another transaction: a later run
            continue
        if turn is False:  # the domain's day is full
            tomorrow = send_window_next_open(next_utc_midnight(now), timezone=zone, window=window)
            plan.defer[tomorrow].append(enrollment.pk)
            continue
        if turn is not True:
            plan.domain_counts[enrollment.pk] = turn
        room[chosen] -= 1
        plan.claims.append((enrollment, chosen, step))
        if credentials[chosen].is_paced:
            paced.add(chosen)
            plan.paced[chosen] = now + pace_gap(credentials[chosen])
    return plan


def _reauthorization_only(candidates: list, campaign, unauthenticated, unauthorized) -> bool:
    """Whether no mailbox is left for the enrollment but ones waiting to be
    re-authorized (or none at all once require_authenticated_domain holds some back):
    it then waits SENDING_CREDENTIAL_RETRY_SECONDS."""
    if campaign.require_authenticated_domain:
        candidates = [pk for pk in candidates if pk not in unauthenticated]
    return not candidates or all(pk in unauthorized for pk in candidates)


def _campaigns_read(campaign_ids: set) -> tuple[dict, dict, dict]:
    """The campaigns by id (with their account's recipient domain cap, `account_cap`),
    their step positions, and their credential ids in link order."""
    campaigns = {
        c.pk: c
        for c in Campaign.objects.filter(pk__in=campaign_ids).annotate(
            account_cap=F("account__max_per_recipient_domain_per_day")
        )
    }
    positions = defaultdict(set)
    for campaign_id, position in CampaignStep.objects.filter(
        campaign_id__in=campaign_ids
    ).values_list("campaign_id", "position"):
        positions[campaign_id].add(position)
    linked = defaultdict(list)  # campaign -> credential ids, in link order
    for campaign_id, credential_id in (
        Campaign.credentials.through.objects.filter(campaign_id__in=campaign_ids)
        .order_by("id")
        .values_list("campaign_id", "smtpcredential_id")
    ):
        linked[campaign_id].append(credential_id)
    return campaigns, positions, linked


def _credentials_lock(linked: dict, *, now: datetime, busy) -> tuple[set, set, dict]:
    """The enabled and the unauthorized ones of the linked credentials, and the free ones
    (`_mailbox_free`: enabled, not paced, not busy), locked."""
    credential_ids = {c for ids in linked.values() for c in ids}
    rows = SmtpCredential.objects.filter(pk__in=credential_ids).order_by("pk")
    # Which are enabled, read without locking: a campaign is paused only when none is.
    # An OAuth mailbox waiting to be re-authorized is enabled but gets no claims: its
    # threads, and campaigns with no other mailbox, wait (never paused, never failed).
    enabled_status = dict(rows.filter(disabled_at__isnull=True).values_list("pk", "oauth_status"))
    unauthorized = {
        pk
        for pk, oauth_status in enabled_status.items()
        if oauth_status == SmtpCredential.OAuthStatus.REAUTHORIZATION_REQUIRED
    }
    # The mailboxes claims may be made for are locked, so the daily counters read next
    # cannot move until this transaction ends; concurrent schedulers never take the
    # same one. Only the free ones: a paced or busy mailbox gets no claim anyway, and a
    # campaign of thousands of paced mailboxes, of which a few are free at a time,
    # would otherwise lock (and write a lock record for) every one of them in every
    # claim transaction. The pace is checked again under the lock: a row whose
    # next_send_earliest_at another run moved ahead since is re-read by FOR UPDATE
    # and left out. A row another transaction holds is skipped: a sender
    # recording a message holds its mailbox's row for a moment (and the account's
    # usage row), and waiting for it here could close a cycle of waits with the other
    # senders (a deadlock). Enrollments of a skipped mailbox wait for a later run.
    free = rows.filter(_mailbox_free("", now=now, busy=busy))
    credentials = {c.pk: c for c in free.select_for_update(skip_locked=True)}
    return set(enabled_status), unauthorized, credentials


def _write(plan: _Plan, *, now: datetime) -> list[Batch]:
    if plan.blocked:
        blocked_stop(enrollments=plan.blocked, at=now)
    if plan.complete:
        enrollments_complete(enrollment_ids=[e.pk for e in plan.complete], now=now)
        campaigns_complete_if_done(campaign_ids={e.campaign_id for e in plan.complete}, at=now)
    for when, ids in plan.defer.items():
        Enrollment.objects.filter(pk__in=ids).update(next_send_at=when, updated_at=now)
    if plan.pause:
        campaigns_pause_if_unsendable(campaign_ids=plan.pause, at=now)
    if not plan.claims:
        return []

    lease_until = now + timedelta(seconds=settings.SENDING_LEASE_SECONDS)
    by_credential = defaultdict(list)
    for enrollment, credential_id, step in plan.claims:
        by_credential[credential_id].append((enrollment, step))
    batches, rows = [], []
    for credential_id, items in by_credential.items():
        batch_id = uuid.uuid4()
        paced = credential_id in plan.paced
        batches.append(Batch(batch_id, credential_id, size=len(items), paced=paced))
        rows += [
            SendClaim(
                enrollment_id=enrollment.pk,
                batch_id=batch_id,
                credential_id=credential_id,
                step=step,
                claimed_at=now,
                due_at=enrollment.next_send_at,
                lease_until=lease_until,
                domain_count_id=plan.domain_counts.get(enrollment.pk),
            )
            for enrollment, step in items
        ]
    _claims_insert(rows)
    if plan.domain_counts:
        counts_reserve(Counter(plan.domain_counts.values()))
    today = utc_day(now)
    # One UPDATE per distinct claim count (usually one or two), not one per mailbox. The
    # rows are locked (_decide): the reservation is computed from what was read.
    by_count = defaultdict(list)
    for credential_id, items in by_credential.items():
        by_count[len(items)].append(credential_id)
    for count, credential_ids in by_count.items():
        changes = {"daily_sent_count": daily_used(today) + count, "daily_sent_on": today}
        pace = [
            When(pk=pk, then=Value(plan.paced[pk])) for pk in credential_ids if pk in plan.paced
        ]
        if pace:
            changes["next_send_earliest_at"] = Case(*pace, default=F("next_send_earliest_at"))
        SmtpCredential.objects.filter(pk__in=credential_ids).update(**changes)
    return batches


def _claims_insert(rows: list[SendClaim]) -> None:
    """The claims, the enrollments' only write: one open claim per enrollment, so an
    enrollment another scheduler claimed since this scan's snapshot fails the partial
    unique index (at once: that claim has committed, or this transaction could not have
    locked the row), and this transaction rolls back whole: the lost race."""
    try:
        SendClaim.objects.bulk_create(rows)
    except IntegrityError as exc:
        diag = getattr(exc.__cause__, "diag", None)
        if getattr(diag, "constraint_name", None) == _OPEN_CLAIM_UNIQUE:
            raise _LostRace() from exc
        raise


# Key of the PostgreSQL advisory lock one scheduler run holds (any constant of the
# project's own; "SEND" in ASCII).
SCHEDULER_LOCK = 0x53454E44


@contextmanager
def _single_run():
    """Yields whether this is the only scheduler run in progress. Runs overlap when a
    dispatch's fast path and beat's tick meet, or with several beats; the claims would
    stay correct, but their mailbox updates could wait on each other in a cycle. An
    advisory lock lets one run at a time and the others return at once (the run in
    progress claims what they would have). A run inside a caller's transaction takes
    no lock.

    The lock is a transaction's (`pg_try_advisory_xact_lock`), held by a transaction
    of a connection of its own that stays open for the run and ends after it: the
    run's own transactions commit one by one, and a lock taken and released by
    separate statements of a session would, behind PgBouncer in transaction mode, be
    released on another server connection than the one holding it (docs/scale.md). A
    worker that dies mid-run drops its connection, and the lock with it."""
    if connection.in_atomic_block:
        yield True
        return
    holder = connections.create_connection(DEFAULT_DB_ALIAS)
    try:
        with holder.cursor() as cursor:
            cursor.execute("BEGIN")
            cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [SCHEDULER_LOCK])
            acquired = cursor.fetchone()[0]
        yield acquired
    finally:
        try:
            with holder.cursor() as cursor:
                cursor.execute("ROLLBACK")
        finally:
            holder.close()


def schedule_due(*, now: datetime | None = None, enqueue: bool = False) -> list[Batch]:
    """One scheduler run (see the module docstring). Returns the batches claimed; with
    enqueue=True each is queued to a sending task after its transaction commits. Returns
    [] at once while another run is in progress."""
    with _single_run() as alone:
        if not alone:
            logger.debug("send scheduler: another run is in progress")
            return []
        return _schedule_due(now=now or timezone.now(), enqueue=enqueue)


def _schedule_due(*, now: datetime, enqueue: bool) -> list[Batch]:
    claims_recover(now=now)
    suppressed_end(now=now)
    batch_size = settings.SENDING_BATCH_SIZE
    examined_total = 0
    batches: list[Batch] = []
    # A mailbox still sending an earlier run's claims gets no new ones: one SMTP
    # session per mailbox, and a slow mailbox holds one worker thread, not several.
    busy = set(
        SendClaim.objects.open()
        .filter(claimed_at__lt=now, lease_until__gt=now)
        .values_list("credential_id", flat=True)
        .distinct()
    )
    while examined_total < settings.SENDING_MAX_PER_TICK:
        try:
            claimed, examined = _claim_once(now=now, batch_size=batch_size, busy=busy)
        except _LostRace:
            logger.info("send scheduler lost a claim race; the next tick retries")
            break
        batches += claimed
        examined_total += examined
        if enqueue:
            # A paced mailbox gets one claim per run: its task is queued as soon as the
            # transaction that claimed it has committed, not after the whole run (a
            # fleet's first run claims for thousands of mailboxes).
            for batch in claimed:
                if batch.paced:
                    transaction.on_commit(
                        functools.partial(
                            batches_enqueue, batch.credential_id, [str(batch.batch_id)]
                        )
                    )
        if examined < batch_size:
            break
    if enqueue and batches:
        # One task per unpaced mailbox for the whole run (one SMTP session), queued once
        # every transaction of the run has committed.
        by_credential: dict = defaultdict(list)
        for batch in batches:
            if not batch.paced:
                by_credential[batch.credential_id].append(str(batch.batch_id))
        for credential_id, batch_ids in by_credential.items():
            transaction.on_commit(functools.partial(batches_enqueue, credential_id, batch_ids))
    return batches


def batches_enqueue(credential_id, batch_ids: list[str]) -> None:
    """Queue the sending task of a mailbox's committed batches. A failure only delays
    them: the claims lapse after SENDING_LEASE_SECONDS and are claimed again."""
    try:
        send_batch.apply_async((batch_ids, str(credential_id)), retry=False)
    except Exception:
        logger.warning(
            "send batches %s not queued; their claims lapse and retry", batch_ids, exc_info=True
        )
