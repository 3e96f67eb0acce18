"""The send scheduler: turns due enrollments into claimed batches per mailbox.

Beat runs `schedule_run()` every SENDING_SCHEDULE_INTERVAL_SECONDS. Each run, in order:

1. recovers the claims of dead workers whose lease lapsed (`claims_recover`);
2. ends due enrollments whose contact became suppressed meanwhile, and decides the
   branches whose deadline passed (`branch_deadlines_decide`: `else`, or `then` when
   the event came; found through their partial index, so the enrollments waiting at a
   branch cost a run nothing until their deadline);
3. claims due enrollments (status scheduled/sent, next_send_at <= now, campaign active,
   contact not suppressed, no open claim) in transactions of SENDING_BATCH_SIZE:
   `SELECT ... FOR UPDATE SKIP LOCKED`, so several schedulers never take the same row.
   The claim is a SendClaim row, at most one open per enrollment (a partial unique
   index): it alone keeps the enrollment out of later scans while it is in flight (its
   next_send_at stays the time it was due), and a scheduler whose scan read the
   enrollment before another's claim committed fails on that index and rolls back (the
   lost race). Per enrollment it decides:
   - the contact's address is on the account's blocklist: stopped (`blocked`);
   - the email step at its current_key (the element it waits for); none (steps were
     removed): completed;
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
4. after commit, queues `outreach.tasks.send_mailboxes` tasks, each carrying the batches
   of about SENDING_BATCH_SIZE claims; the worker sends its mailboxes at once, each
   mailbox's over one SMTP connection. The paced mailboxes' batches of a claim transaction go in
   one task as soon as it commits; the unpaced mailboxes' once the whole run has (one
   may get claims in several transactions of one run, all sent over one connection).

Which mailboxes a claim may go to, and which of their full days defer an enrollment, are
the rules of outreach.mailboxes.blockers (`mailbox_usable`, `deferral`): the ones
GET /campaigns/:id/sending_status reports (docs/sending.md, "The mailbox's blockers").

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
from datetime import date, datetime, timedelta

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, IntegrityError, connection, connections, transaction
from django.db.models import BooleanField, Case, Exists, F, OuterRef, Q, QuerySet, Value, When
from django.db.models.expressions import RawSQL
from django.utils import timezone

from config.crypto import secrets_deferred
from outreach.blocklist.selectors import blocked_addresses
from outreach.campaigns.branch_moves import branch_deadlines_decide
from outreach.campaigns.followups import completions_followup
from outreach.campaigns.state import campaigns_complete_if_done, campaigns_pause_if_unsendable
from outreach.campaigns.windows import SendWindow, send_window_next_open, window_timezone
from outreach.domain_cap.counts import cap_turn, caps_lock, counts_reserve
from outreach.domains.providers import recipient_domain, recipient_providers
from outreach.domains.selectors import credentials_unauthenticated
from outreach.enrollments import enrollments_complete
from outreach.mailboxes.blockers import MailboxFacts, deferral, mailbox_usable
from outreach.mailboxes.pace import daily_used, pace_gap, room_today, utc_day
from outreach.mailboxes.simulator_day import SimulatorDay
from outreach.models.campaigns import Campaign, CampaignStep
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Enrollment, SendClaim
from outreach.sending.blocked import blocked_stop
from outreach.sending.breaker import pauses_in_force
from outreach.sending.recovery import claims_recover, suppressed_end
from outreach.sending.rotation import Rotation, rotation_first
from outreach.sending.tasks import send_mailboxes

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Batch:
    """Claims handed to one sending task: all for one mailbox."""

    batch_id: uuid.UUID
    credential_id: uuid.UUID
    size: int
    # This run gives the mailbox no other claim (paced, or its share of the run taken):
    # its task may be queued as soon as this batch's transaction commits.
    last: bool = False


# --- 3. claims ------------------------------------------------------------------------------


class _LostRace(Exception):
    """Another scheduler claimed an enrollment this one selected: its claim committed
    after this scan's snapshot and before this transaction locked the row, so the scan
    did not see it (the lock alone, released at its commit, is no change of the row)."""


# The partial unique index of open claims (outreach.models.sending.SendClaim).
_OPEN_CLAIM_UNIQUE = "sendclaim_open_unique"


def _mailbox_free(now: datetime) -> Q:
    """The mailbox is enabled, not paused by the complaint guard and not paced past `now`.

    The rules `mailbox_disabled`, `complaint_rate` and `paced` of
    outreach.mailboxes.blockers, said in SQL: the scan must leave out, in the database,
    the enrollments of a mailbox that cannot send (a backlog behind one paced mailbox
    would otherwise fill every run's scan, SENDING_MAX_PER_TICK), and the claim
    transaction locks only the mailboxes that can. The rules decide (mailbox_usable, on
    the rows locked) and sending_status reports them;
    tests/outreach/test_mailbox_blockers.py holds this filter to them."""
    return Q(disabled_at__isnull=True, paused_at__isnull=True) & (
        Q(next_send_earliest_at__isnull=True)
        | Q(next_send_earliest_at__lte=now)
        | Q(max_interval_seconds=0)
    )


# A due enrollment whose thread has no mailbox to keep (new, or its mailbox disabled).
_ROTATING = Q(credential__isnull=True) | Q(credential__disabled_at__isnull=False)


# What the run's view reads of each free mailbox: its pace and its day's room.
_VIEW_FIELDS = (
    "id",
    "max_interval_seconds",
    "daily_limit",
    "daily_sent_count",
    "daily_sent_on",
    "ramp_up",
    "ramp_started_on",
)


@dataclass
class _RunView:
    """What a scheduler run reads once, before its claim transactions, to choose what
    they read: the mailboxes it may claim for (`_mailbox_free`: enabled, not paced, not
    busy), the campaigns each of them serves, the active campaigns without any enabled
    mailbox, and, per campaign met, which of its mailboxes are enabled. A transaction's
    paced claims take their mailboxes out of `free`. Each claim is still decided under
    its rows' locks (_credentials_lock re-reads the free mailboxes it locks): a view a
    moment old only makes a transaction read a row that then gets nothing, or leaves a
    mailbox freed meanwhile to the next run. At a fleet's size this is most of what a run
    costs: read per transaction, the lists of thousands of mailboxes were read, sent
    and parsed again and again (bench/README.md, "One task per claim transaction")."""

    now: datetime
    today: date  # the run's UTC day (outreach.mailboxes.pace): its counters' day
    # The run's due enrollments (step 3 above; a query not run): each scan filters it.
    due: QuerySet
    # The free mailboxes' rows (`_mailbox_free`, a query not run), without their secrets,
    # as a claim transaction locks them: each locks those it may claim for.
    lockable: QuerySet
    busy: set
    free: set
    serving: dict  # free mailbox -> the campaigns it serves
    unsendable: list
    # free mailbox -> its room left today (run start, less this run's claims): which of
    # them a claim transaction locks for its new threads (_credentials_lock)
    room: dict = field(default_factory=dict)
    # campaign -> its new threads (due, without a thread's mailbox: they rotate) among the
    # first SENDING_MAX_PER_TICK due, at the run's start: its unpaced mailboxes' fair
    # share of them (`share`)
    rotating_due: dict = field(default_factory=dict)
    # (mailbox, campaign) -> its rotating claims in this run
    claimed: Counter = field(default_factory=Counter)
    capped: set = field(default_factory=set)  # campaigns whose mailboxes took their share
    enabled: dict = field(default_factory=dict)  # enabled mailbox -> its oauth_status
    linked_seen: set = field(default_factory=set)  # campaigns whose mailboxes are in it
    # (mailbox, provider) -> its ProviderPause in force (the circuit breaker), read once
    pauses: dict = field(default_factory=dict)
    unpaced: set = field(default_factory=set)  # the free mailboxes that are not paced
    # campaign served -> its disabled mailboxes (their threads rotate), read once
    disabled_of: dict = field(default_factory=dict)
    # the free mailboxes with a due thread of their own at the run's start: the only ones
    # whose threads the scan looks up by mailbox (`examinable`)
    threaded: set = field(default_factory=set)
    # campaign served -> [its paced, its unpaced] free mailboxes, kept as they leave `free`
    free_of: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        for pk in self.free:
            for campaign_id in self.serving.get(pk, ()):
                self.free_of.setdefault(campaign_id, [0, 0])[pk in self.unpaced] += 1

    def leave(self, mailboxes) -> None:
        """Mailboxes that take no other claim in this run (paced by a claim, or their share
        taken)."""
        for pk in set(mailboxes) & self.free:
            self.free.discard(pk)
            for campaign_id in self.serving.get(pk, ()):
                self.free_of[campaign_id][pk in self.unpaced] -= 1

    @classmethod
    def read(cls, *, now: datetime, busy: set) -> "_RunView":
        free_rows = SmtpCredential.objects.filter(_mailbox_free(now))
        mailboxes = [
            mailbox
            for mailbox in free_rows.only(*_VIEW_FIELDS).annotate(threaded=_due_thread_exists(now))
            if mailbox.pk not in busy
        ]
        free = {mailbox.pk for mailbox in mailboxes}
        links = Campaign.credentials.through.objects
        serving: dict = defaultdict(set)
        for credential_id, campaign_id in links.filter(smtpcredential_id__in=free).values_list(
            "smtpcredential_id", "campaign_id"
        ):
            serving[credential_id].add(campaign_id)
        # Active campaigns without any enabled mailbox: examined so that they are paused.
        unsendable = list(
            Campaign.objects.filter(status=Campaign.Status.ACTIVE)
            .exclude(
                pk__in=links.filter(smtpcredential__disabled_at__isnull=True).values("campaign_id")
            )
            .values_list("pk", flat=True)
        )
        # The share only bounds unpaced mailboxes (a paced one takes one claim a run): the
        # new threads are counted for campaigns that one of them serves, and only among
        # the first SENDING_MAX_PER_TICK due, what a run may examine (a count of a whole
        # backlog read tens of thousands of rows a run, seconds at a fleet's size).
        unpaced = {m.pk for m in mailboxes if not m.is_paced}
        unpaced_serve = {c for pk in unpaced for c in serving.get(pk, ())}
        due = Enrollment.objects.not_in_flight().filter(
            status__in=Enrollment.DUE_STATUSES,
            next_send_at__lte=now,
            campaign__status=Campaign.Status.ACTIVE,
            contact__unsubscribed_at__isnull=True,
            contact__bounced_at__isnull=True,
        )
        rotating_due: Counter = Counter()
        if unpaced_serve:
            rotating_due.update(
                due.filter(_ROTATING, campaign_id__in=list(unpaced_serve))
                .order_by("next_send_at")
                .values_list("campaign_id", flat=True)[: settings.SENDING_MAX_PER_TICK]
            )
        today = utc_day(now)
        return cls(
            now,
            today,
            due,
            secrets_deferred(free_rows.order_by("pk").select_for_update(skip_locked=True)),
            busy,
            free,
            serving,
            unsendable,
            {m.pk: room_today(m, today) for m in mailboxes},
            rotating_due,
            pauses=pauses_in_force(now=now),
            unpaced=unpaced,
            disabled_of=_disabled_links({c for ids in serving.values() for c in ids}),
            threaded={m.pk for m in mailboxes if m.threaded},
        )

    def share(self, campaign_id, enabled: int) -> int:
        """The most rotating claims one of the campaign's `enabled` mailboxes takes in
        this run: its even share of the new threads the run may examine. A burst larger
        than a run (SENDING_MAX_PER_TICK) would otherwise go to the first mailboxes
        filled, and then pile, at the next run, onto the few mailboxes already done with
        their part, one long session each, while the others finish theirs and then wait:
        each takes its part of a run, and the rest waits for the next."""
        return max(1, -(-self.rotating_due.get(campaign_id, 0) // max(enabled, 1)))

    def examinable(self, *, batch_size: int) -> Q:
        """Due enrollments worth examining: the thread's mailbox may send now, or, for a
        thread without a usable mailbox (new, or its mailbox disabled), the campaign has
        a mailbox that may, or none enabled at all (the campaign is paused below).
        Enrollments waiting for a paced or busy mailbox are left out here, in SQL, so a
        backlog behind one mailbox never fills a run's scan (SENDING_MAX_PER_TICK).

        The scan gets constant lists (hashed by PostgreSQL): no subquery per due row,
        whatever the planner believes of how many rows are due. (Correlated subqueries
        here were planned per row when the statistics said few rows were due, and a run
        over a fleet of thousands of mailboxes took minutes: bench/README.md, "Fleet".)

        A campaign's new threads are taken as far as its free mailboxes can claim in this
        run (`wanted`): one each for a paced mailbox. Taken in the order of the due
        rows of every campaign served, one transaction's 100 rows were one campaign's, of
        which it claimed as many as that campaign had free mailboxes (often one), and
        each row read the due rows of the campaigns before it: a fleet of campaigns of
        100 mailboxes (the most a campaign names through the API) made one transaction
        per claim, each reading every due row (bench/README.md, "The fleet at platform
        size")."""
        examinable = Q(credential_id__in=list(self.free & self.threaded))
        # Per campaign served by a free mailbox (its share not taken): how many of its due
        # new threads a transaction examines, one per free paced mailbox (a paced mailbox
        # takes one claim a run), the batch for an unpaced one, and its disabled mailboxes
        # (whose threads rotate too).
        wanted = {
            campaign_id: (
                min(paced + unpaced * batch_size, batch_size),
                list(self.disabled_of.get(campaign_id, ())),
            )
            for campaign_id, (paced, unpaced) in self.free_of.items()
            if (paced or unpaced) and campaign_id not in self.capped
        }
        if wanted:
            examinable |= Q(_new_threads_first(wanted, now=self.now, batch_size=batch_size))
        if self.unsendable:
            # (No mailbox enabled: every thread of theirs rotates.)
            examinable |= Q(campaign_id__in=self.unsendable)
        return examinable

    def enabled_read(self, linked: dict) -> None:
        """The enabled ones of the mailboxes of campaigns not met yet in this run."""
        new = {pk for cid, ids in linked.items() if cid not in self.linked_seen for pk in ids}
        self.linked_seen.update(linked)
        if new:
            self.enabled.update(
                SmtpCredential.objects.filter(pk__in=new, disabled_at__isnull=True).values_list(
                    "pk", "oauth_status"
                )
            )


def _due_thread_exists(now: datetime) -> Exists:
    """Whether the mailbox (the outer row) has a due thread of its own. Asked once a run of
    the free mailboxes: at a fleet's dispatch 10,000 mailboxes are free and none has a
    thread yet, and their list in each transaction's scan made it read every due row
    (a sequential scan) twenty times a run."""
    return Exists(
        Enrollment.objects.filter(
            credential_id=OuterRef("pk"),
            status__in=Enrollment.DUE_STATUSES,
            next_send_at__lte=now,
        )
    )


def _disabled_links(campaign_ids: set) -> dict:
    """The disabled mailboxes of these campaigns: {campaign: {mailbox, ...}}."""
    disabled: dict = defaultdict(set)
    if campaign_ids:
        for campaign_id, credential_id in Campaign.credentials.through.objects.filter(
            campaign_id__in=list(campaign_ids), smtpcredential__disabled_at__isnull=False
        ).values_list("campaign_id", "smtpcredential_id"):
            disabled[campaign_id].add(credential_id)
    return disabled


# One campaign's (`wanted`'s) first due new threads (no mailbox yet, or a disabled one),
# at most {limit}: through enrollment_new_thread_idx, (campaign, next_send_at) of the due
# rows without a mailbox, so each campaign reads its own first rows and no other
# campaign's. "Not in flight" is a probe of the open claims' unique index per row (OFFSET
# 0 keeps the subquery from becoming an anti-join): planned as an anti-join from
# statistics taken with few claims open, each row was compared with every open claim, and
# a fleet's first run (2,000 claims) spent seconds a transaction there.
_CAMPAIGN_NEW_THREADS = """
    (SELECT e.id, e.next_send_at FROM outreach_enrollment e
     WHERE e.campaign_id = wanted.campaign_id AND e.status IN ('scheduled', 'sent')
       AND e.credential_id IS NULL AND e.next_send_at <= %s
       AND NOT EXISTS (SELECT 1 FROM outreach_sendclaim c
                       WHERE c.enrollment_id = e.id AND c.finished_at IS NULL OFFSET 0)
     ORDER BY e.next_send_at LIMIT {limit})
    UNION ALL
    (SELECT e.id, e.next_send_at FROM outreach_enrollment e
     WHERE wanted.disabled <> '' AND e.campaign_id = wanted.campaign_id
       AND e.credential_id = ANY(string_to_array(wanted.disabled, ',')::uuid[])
       AND e.status IN ('scheduled', 'sent') AND e.next_send_at <= %s
       AND NOT EXISTS (SELECT 1 FROM outreach_sendclaim c
                       WHERE c.enrollment_id = e.id AND c.finished_at IS NULL OFFSET 0)
     ORDER BY e.next_send_at LIMIT {limit})
    ORDER BY next_send_at LIMIT {limit}
"""

# The transaction's new threads: the campaigns in the order of their first due new thread
# (one row read each), then each campaign's first rows, as many as it asked, until the
# batch is full. An array (an InitPlan computed once), so the scan can fetch its rows by
# primary key, beside the free mailboxes' threads by credential. The Limit over the
# campaigns in that order stops reading at the batch (an incremental sort per campaign):
# at a fleet's first run, 100 campaigns of 100 free mailboxes, each of the run's 20
# transactions read each campaign's 100 first rows, 10,000 rows and their claim probes to
# keep 100 (bench/README.md, "The fleet at platform size").
_NEW_THREADS_SQL = f"""
"outreach_enrollment"."id" = ANY(ARRAY(
    SELECT picked.id
    FROM (
        SELECT wanted.campaign_id, wanted.n, wanted.disabled, first.next_send_at AS first_at
        FROM unnest(%s::uuid[], %s::int[], %s::text[]) AS wanted(campaign_id, n, disabled)
        CROSS JOIN LATERAL ({_CAMPAIGN_NEW_THREADS.format(limit=1)}) first
        ORDER BY first.next_send_at, wanted.campaign_id
    ) wanted
    CROSS JOIN LATERAL ({_CAMPAIGN_NEW_THREADS.format(limit="wanted.n")}) picked
    ORDER BY wanted.first_at, wanted.campaign_id, picked.next_send_at LIMIT %s
))
"""  # noqa: S608 (constant SQL: the one template twice)


def _new_threads_first(wanted: dict, *, now: datetime, batch_size: int) -> RawSQL:
    """The due new threads `wanted` names ({campaign: (count, [disabled mailbox, ...])}):
    the campaigns by their first due new thread, each campaign's first `count` by
    next_send_at, until `batch_size` (what the scan may take), as a condition of the scan."""
    campaigns = list(wanted)
    return RawSQL(  # noqa: S611 (constant SQL, the values as parameters)
        _NEW_THREADS_SQL,
        [
            campaigns,
            [wanted[c][0] for c in campaigns],
            [",".join(map(str, wanted[c][1])) for c in campaigns],
            now,
            now,
            now,
            now,
            batch_size,
        ],
        output_field=BooleanField(),
    )


@dataclass
class _Plan:
    complete: list = field(default_factory=list)  # enrollments without a step left
    defer: dict = field(default_factory=lambda: defaultdict(list))  # when -> enrollment ids
    claims: list = field(default_factory=list)  # (enrollment, credential id, step)
    pause: set = field(default_factory=set)  # campaign ids without an enabled credential
    paced: dict = field(default_factory=dict)  # credential id -> its new next_send_earliest_at
    capped: set = field(default_factory=set)  # campaigns whose mailboxes took their share
    full: set = field(default_factory=set)  # mailboxes that took their share of the run
    blocked: list = field(default_factory=list)  # enrollments whose address is blocked
    # enrollment id -> the recipient domain count its claim reserves a unit of
    domain_counts: dict = field(default_factory=dict)
    # mailboxes whose ramp-up counts its days from this claim, its first since it was set
    ramp_starts: set = field(default_factory=set)


def _claim_once(view: _RunView, *, batch_size: int) -> tuple[list[Batch], int]:
    """One transaction: select, decide, write. Returns (batches, enrollments examined).
    Enrollments whose thread is on a busy mailbox wait for a later run."""
    now = view.now
    with transaction.atomic():
        due = (
            view.due.filter(view.examinable(batch_size=batch_size))
            .annotate(
                contact_timezone=F("contact__timezone"), contact_email=F("contact__email_lower")
            )
            .order_by("next_send_at")
            .select_for_update(skip_locked=True, of=("self",))
        )
        enrollments = list(
            due.only(
                "id",
                "campaign_id",
                "contact_id",
                "current_step",
                "current_key",
                "credential_id",
                "next_send_at",
            )[:batch_size]
        )
        if not enrollments:
            return [], 0
        plan = _decide(enrollments, view=view)
        batches = _write(plan, now=now, today=view.today)
    # Paced, they take no more claims in this run; a campaign whose mailboxes took their
    # share gives its new threads no more (a rolled back transaction raised).
    view.leave(plan.paced.keys() | plan.full)
    view.capped.update(plan.capped)
    return batches, len(enrollments)


def _decide(enrollments: list[Enrollment], *, view: _RunView) -> _Plan:
    """Per due enrollment: complete, defer, pause its campaign, or claim (step 3 above)."""
    # Long: one decision per enrollment in the documented order (step 3 above), read top
    # to bottom; the rules it applies live in pace, domain_cap and blocklist.
    now, busy = view.now, view.busy
    campaigns, positions, linked = _campaigns_read({e.campaign_id for e in enrollments})
    enabled_ids, unauthorized, credentials = _credentials_lock(linked, enrollments, view=view)
    account_of = {e.pk: campaigns[e.campaign_id].account_id for e in enrollments}
    # Lists, not generators: the rules' modules read data and never run this one's code.
    blocked = blocked_addresses([(account_of[e.pk], e.contact_email) for e in enrollments])  # type: ignore[attr-defined]  # annotated
    domain_caps = caps_lock(
        [(e.pk, campaigns[e.campaign_id], e.contact_email) for e in enrollments],  # type: ignore[attr-defined]  # annotated
        day=view.today,
    )
    # Mailboxes held by require_authenticated_domain (read only when a campaign asks).
    required = [
        pk for c in campaigns.values() if c.require_authenticated_domain for pk in linked[c.pk]
    ]
    unauthenticated = credentials_unauthenticated(credential_ids=required) if required else set()
    room = {pk: room_today(c, view.today) for pk, c in credentials.items()}
    # SIMULATOR_DAILY_LIMIT (docs/sandbox.md): the account's day is read only for a claim
    # of one of its simulator mailboxes, and only when one is among those locked.
    simulators = {pk for pk, c in credentials.items() if c.is_simulator}
    simulator_day = SimulatorDay(now) if simulators else None
    # Paced by a claim of this transaction: no other claim. (A mailbox paced already, by
    # another run, is not usable: the `paced` rule, read under the rows' locks.)
    paced: set = set()
    held_of = _held_by_breaker(enrollments, linked, view) if view.pauses else {}
    window_open_at: dict = {}
    window_of: dict = {}  # campaign -> its send window
    # Looked at again then (a re-authorization does not wake them; they wait this long).
    reauthorization_wait = now + timedelta(seconds=settings.SENDING_CREDENTIAL_RETRY_SECONDS)
    # Per campaign, once: its enabled mailboxes (link order), and those of them a claim
    # may go to in this transaction (locked, so free; authorized; authenticated when
    # the campaign asks). A campaign may have thousands of mailboxes, of which a few are
    # free at a time: the per-enrollment choice below looks at those few.
    enabled_of: dict = {}
    usable_of: dict = {}
    share_of: dict = {}
    rotation_of: dict = {}
    stuck_of: dict = {}
    takers_of: dict = {}
    for campaign in campaigns.values():
        window_of[campaign.pk] = SendWindow.from_json(campaign.send_window)
        enabled = [pk for pk in linked[campaign.pk] if pk in enabled_ids]
        enabled_of[campaign.pk] = (enabled, set(enabled))
        # Its new threads' share per mailbox: over the mailboxes that may take claims
        # (sending, paced or free), not those waiting to be re-authorized or held back.
        takers = [
            pk
            for pk in enabled
            if pk not in unauthorized
            and not (campaign.require_authenticated_domain and pk in unauthenticated)
        ]
        takers_of[campaign.pk] = takers
        share_of[campaign.pk] = view.share(campaign.pk, len(takers))
        # Once per campaign for its new threads (it walks every enabled mailbox).
        stuck_of[campaign.pk] = _reauthorization_only(
            enabled, campaign, unauthenticated, unauthorized
        )
        # The rules of outreach.mailboxes.blockers, on the rows locked: what
        # sending_status reports of the mailbox is what decides here.
        usable = [
            pk
            for pk in enabled
            if pk in credentials
            and pk not in busy
            and mailbox_usable(
                MailboxFacts(credentials[pk], campaign, now, unauthenticated=pk in unauthenticated)
            )
        ]
        usable_of[campaign.pk] = set(usable)
        rotation_of[campaign.pk] = Rotation(
            usable,
            campaign_id=campaign.pk,
            share=share_of[campaign.pk],
            room=room,
            claimed=view.claimed,
            paced=paced,
        )
    plan = _Plan()
    for enrollment in enrollments:
        campaign = campaigns[enrollment.campaign_id]
        if (account_of[enrollment.pk], enrollment.contact_email) in blocked:  # type: ignore[attr-defined]  # annotated
            plan.blocked.append(enrollment)
            continue
        step = _step_due(enrollment, positions[campaign.pk])
        if step is None:
            plan.complete.append(enrollment)
            continue
        window = window_of[campaign.pk]
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
        if (
            _reauthorization_only([thread], campaign, unauthenticated, unauthorized)
            if on_thread
            else stuck_of[campaign.pk]
        ):
            plan.defer[reauthorization_wait].append(enrollment.pk)
            continue
        rotation = None if on_thread else rotation_of[campaign.pk]
        # Mailboxes paused toward the recipient's provider (the circuit breaker) -> until.
        held = held_of.get(enrollment.pk, {})
        if rotation is None:
            if thread in held:  # the thread keeps its mailbox: the step waits for it
                plan.defer[held[thread]].append(enrollment.pk)
                continue
            chosen = thread if thread in usable_of[campaign.pk] and thread not in paced else None
        else:
            chosen = rotation.best(held)
            if chosen is None and rotation.shares_taken:  # (all taken: best() gives none)
                plan.capped.add(campaign.pk)
            takers = takers_of[campaign.pk]
            if chosen is None and held and takers and all(pk in held for pk in takers):
                # Every mailbox that could take it is paused toward its provider.
                plan.defer[min(held[pk] for pk in takers)].append(enrollment.pk)
                continue
        if chosen is None:
            # Its mailboxes are all still sending, paced, held for a moment, or took their
            # share of the run: a later run.
            continue
        # Its daily limit, its account's simulator day, the recipient domain's day: each
        # read only when the one before leaves room (a count taken is a unit reserved).
        has_room = room[chosen] > 0
        simulated = (
            simulator_day.take(campaign.account_id)
            if has_room and simulator_day is not None and chosen in simulators
            else True
        )
        if simulated is None:  # the account's simulator day is being counted: a later run
            continue
        capped = domain_caps.get(enrollment.pk)  # None: no cap in force for its domain
        turn = cap_turn(capped) if capped is not None and has_room and simulated else True
        if turn is None:  # its domain's count is held by another transaction: a later run
            continue
        blocker = deferral(
            MailboxFacts(
                credentials[chosen],
                campaign,
                now,
                room=room[chosen],
                simulator_left=0 if simulated is False else None,
                domain_held=turn is False,
            )
        )
        if blocker is not None:  # a day is full: the enrollment waits for the next one
            assert blocker.until is not None  # a deferring rule names when its day ends
            reopen = send_window_next_open(blocker.until, timezone=zone, window=window)
            plan.defer[reopen].append(enrollment.pk)
            continue
        if turn is not True:
            plan.domain_counts[enrollment.pk] = turn
        room[chosen] -= 1
        plan.claims.append((enrollment, chosen, step))
        if credentials[chosen].ramp_up and credentials[chosen].ramp_started_on is None:
            plan.ramp_starts.add(chosen)
        if credentials[chosen].is_paced:
            paced.add(chosen)
            plan.paced[chosen] = now + pace_gap(credentials[chosen])
        if rotation is not None:
            view.claimed[chosen, campaign.pk] += 1
            if view.claimed[chosen, campaign.pk] >= share_of[campaign.pk]:
                plan.full.add(chosen)
            rotation.taken(chosen)
    view.room.update(room)
    return plan


def _held_by_breaker(enrollments: list, linked: dict, view: _RunView) -> dict:
    """Per enrollment whose recipient's provider a mailbox of its campaign is paused
    toward (outreach.sending.breaker): {mailbox: until}. Asked only with a pause in force
    (`view.pauses`); without one for these campaigns' mailboxes (the usual case) it reads
    nothing: no provider is looked up, and the claim query stays the one query it was."""
    mailboxes = {pk for ids in linked.values() for pk in ids}
    paused: dict = defaultdict(dict)  # provider -> {mailbox: until}
    for (pk, provider), pause in view.pauses.items():
        if pk in mailboxes:
            paused[provider][pk] = pause.until
    if not paused:
        return {}
    domains = {e.pk: recipient_domain(e.contact_email) for e in enrollments}
    providers = recipient_providers(domains.values())
    return {
        pk: paused[providers[domain]]
        for pk, domain in domains.items()
        if providers[domain] in paused
    }


def _reauthorization_only(
    candidates: list, campaign, unauthenticated: set, unauthorized: set
) -> bool:
    """Whether no mailbox is left for the enrollment but ones waiting to be
    re-authorized (or none at all once require_authenticated_domain holds some back):
    it then waits SENDING_CREDENTIAL_RETRY_SECONDS."""
    if campaign.require_authenticated_domain:
        candidates = [pk for pk in candidates if pk not in unauthenticated]
    return not candidates or unauthorized.issuperset(candidates)


def _step_due(enrollment: Enrollment, positions: dict) -> int | None:
    """The position of the email step a due enrollment sends: the one at its
    current_key (API.md 17), or, for a row moved before enrollments had keys, the one
    after its last sent. None when there is none (steps were removed): completed."""
    if enrollment.current_key:
        return positions.get(enrollment.current_key)
    step = enrollment.current_step + 1
    return step if step in positions.values() else None


def _campaigns_read(campaign_ids: set) -> tuple[dict, dict, dict]:
    """The campaigns by id (with their account's recipient domain cap, `account_cap`),
    their email steps' positions by key, and their credential ids in link order."""
    campaigns = {
        c.pk: c
        for c in Campaign.objects.filter(pk__in=campaign_ids).annotate(
            account_cap=F("account__max_per_recipient_domain_per_day")
        )
    }
    positions: dict = defaultdict(dict)
    for campaign_id, key, position, branch in CampaignStep.objects.filter(
        campaign_id__in=campaign_ids
    ).values_list("campaign_id", "key", "position", "branch"):
        if not branch:  # a branch sends nothing
            positions[campaign_id][key] = position
    linked = defaultdict(list)  # campaign -> credential ids, in link order
    for campaign_id, credential_id in (
        Campaign.credentials.through.objects.filter(campaign_id__in=campaign_ids)
        .order_by("id")
        .values_list("campaign_id", "smtpcredential_id")
    ):
        linked[campaign_id].append(credential_id)
    return campaigns, positions, linked


# Mailboxes locked for a campaign's new threads beyond one each: room for rows found
# held by another transaction (skipped) or no longer free under the lock.
_LOCK_SPARE = 16


def _credentials_lock(linked: dict, enrollments: list, *, view: _RunView) -> tuple[set, set, dict]:
    """The enabled and the unauthorized ones of the linked credentials, and, locked, the
    free ones (`_mailbox_free`: enabled, not paced, not busy) that the enrollments may
    be claimed for: their threads' mailboxes, and for each campaign's new threads its
    best mailboxes in the rotation's order, a few more than it has new threads."""
    # Which are enabled, as the run's view has them: a campaign is paused only when none
    # is. An OAuth mailbox waiting to be re-authorized is enabled but gets no claims: its
    # threads, and campaigns with no other mailbox, wait (never paused, never failed).
    view.enabled_read(linked)
    credential_ids = {c for ids in linked.values() for c in ids}
    enabled = {pk for pk in credential_ids if pk in view.enabled}
    unauthorized = {
        pk
        for pk in enabled
        if view.enabled[pk] == SmtpCredential.OAuthStatus.REAUTHORIZATION_REQUIRED
    }
    # The mailboxes claims may be made for are locked, so the daily counters read next
    # cannot move until this transaction ends; concurrent schedulers never take the
    # same one. Only the free ones of the run's view: a paced or busy mailbox gets no
    # claim anyway, and a campaign of thousands of paced mailboxes, of which a few are
    # free at a time, would otherwise lock (and write a lock record for) every one of
    # them in every claim transaction. Whether each is free is read again under the
    # lock: a row whose next_send_earliest_at another run moved ahead since is re-read
    # by FOR UPDATE and left out. A row another transaction holds is skipped: a sender
    # recording a message holds its mailbox's row for a moment (and the account's usage
    # row), and waiting for it here could close a cycle of waits with the other senders
    # (a deadlock). Enrollments of a skipped mailbox wait for a later run.
    wanted = {e.credential_id for e in enrollments} & credential_ids & view.free
    # A new thread, or one whose mailbox is gone (disabled, or no longer the campaign's).
    kept = {cid: enabled.intersection(ids) for cid, ids in linked.items()}
    new_threads = Counter(
        [e.campaign_id for e in enrollments if e.credential_id not in kept[e.campaign_id]]
    )
    for campaign_id, count in new_threads.items():
        wanted.update(
            rotation_first(
                [pk for pk in linked[campaign_id] if pk in view.free],
                count + _LOCK_SPARE,
                campaign_id=campaign_id,
                room=view.room,
                claimed=view.claimed,
            )
        )
    # (Not busy: the view's free ones are not.)
    credentials = {c.pk: c for c in view.lockable.filter(pk__in=sorted(wanted))}
    return enabled, unauthorized, credentials


def _write(plan: _Plan, *, now: datetime, today: date) -> list[Batch]:
    if plan.blocked:
        blocked_stop(enrollments=plan.blocked, at=now)
    if plan.complete:
        enrollments_complete(enrollment_ids=[e.pk for e in plan.complete], now=now)
        campaigns_complete_if_done(campaign_ids={e.campaign_id for e in plan.complete}, at=now)
        completions_followup(plan.complete)
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
        last = credential_id in plan.paced or credential_id in plan.full
        batches.append(Batch(batch_id, credential_id, size=len(items), last=last))
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
    # One UPDATE per distinct claim count (usually one or two), not one per mailbox. The
    # rows are locked (_decide): the reservation is computed from what was read.
    by_count = defaultdict(list)
    for credential_id, items in by_credential.items():
        by_count[len(items)].append(credential_id)
    used = daily_used(today)
    for count, credential_ids in by_count.items():
        changes = {"daily_sent_count": used + count, "daily_sent_on": today}
        pace = [
            When(pk=pk, then=Value(plan.paced[pk])) for pk in credential_ids if pk in plan.paced
        ]
        if pace:
            changes["next_send_earliest_at"] = Case(*pace, default=F("next_send_earliest_at"))
        ramp = [When(pk=pk, then=Value(today)) for pk in credential_ids if pk in plan.ramp_starts]
        if ramp:
            changes["ramp_started_on"] = Case(*ramp, default=F("ramp_started_on"))
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
    # Branches whose deadline passed (outreach.campaigns.branch_moves): decided before
    # the claims, so a step they lead to that is due now goes out in this run.
    branch_deadlines_decide(now=now)
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
    view = _RunView.read(now=now, busy=busy)
    pending: dict = defaultdict(list)  # mailbox -> its batches of this run not queued yet
    try:
        while examined_total < settings.SENDING_MAX_PER_TICK:
            try:
                claimed, examined = _claim_once(view, batch_size=batch_size)
            except _LostRace:
                logger.info("send scheduler lost a claim race; the next tick retries")
                break
            batches += claimed
            examined_total += examined
            if enqueue:
                _queue_last(claimed, pending)
            if examined < batch_size:
                break
    finally:
        if enqueue and pending:
            # The other mailboxes' batches of the whole run, queued once every
            # transaction of the run has committed; also when a later one failed: the
            # batches committed before it do not wait for their lease to lapse.
            for group in _groups(list(pending.values()), claims_per_task=batch_size):
                transaction.on_commit(functools.partial(batches_enqueue, group))
    return batches


def _queue_last(claimed: list[Batch], pending: dict) -> None:
    """A mailbox's batches of a run go in one task (one SMTP session). One that this run
    gives no other claim (paced, or its share taken) is queued as soon as the
    transaction that claimed its last batch has committed, with its earlier batches of
    the run: a fleet's first run claims for thousands of mailboxes, and a burst's
    first mailboxes need not wait for its last claims."""
    ready = []
    for batch in claimed:
        pending[batch.credential_id].append(batch)
        if batch.last:
            ready.append(pending.pop(batch.credential_id))
    if ready:
        transaction.on_commit(functools.partial(batches_enqueue, _task_of(ready)))


def _task_of(mailboxes: list[list[Batch]]) -> list[tuple]:
    return [(batches[0].credential_id, [str(b.batch_id) for b in batches]) for batches in mailboxes]


def _groups(mailboxes: list[list[Batch]], *, claims_per_task: int) -> list[list[tuple]]:
    """Mailboxes' batches as tasks of about `claims_per_task` claims: a task loads all
    its claims before its first message, so a burst's tasks stay small enough to load
    one while another's mailboxes send (a mailbox with more claims goes alone, all of
    them over its one connection)."""
    groups: list[list[list[Batch]]] = []
    claims = 0
    for batches in mailboxes:
        size = sum(b.size for b in batches)
        if groups and groups[-1] and claims + size <= claims_per_task:
            groups[-1].append(batches)
            claims += size
        else:
            groups.append([batches])
            claims = size
    return [_task_of(group) for group in groups]


def batches_enqueue(mailboxes: list[tuple]) -> None:
    """Queue one sending task for mailboxes' committed batches, `[(credential id, [batch
    id, ...]), ...]` (about SENDING_BATCH_SIZE claims: tasks spread over the workers).
    A failure only delays them: the claims lapse after SENDING_LEASE_SECONDS and are
    claimed again."""
    groups = [[str(credential_id), batch_ids] for credential_id, batch_ids in mailboxes]
    try:
        send_mailboxes.apply_async((groups,), retry=False)
    except Exception:
        logger.warning(
            "sending task for %d mailboxes not queued; their claims lapse and retry",
            len(groups),
            exc_info=True,
        )
