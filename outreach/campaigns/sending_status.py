"""Why a campaign sends or does not, per mailbox, and its next planned sends: the
answer of GET /campaigns/:id/sending_status (docs/sending.md, "Why isn't it sending?").

A dry run of the scheduler's decisions (outreach.sending.scheduler) over the same rows: it only
reads (no lock, no write), so it can be asked at any time. The reasons a mailbox cannot
send now are the scheduler's own: the blockers its decision function,
outreach.mailboxes.blockers.mailbox_blockers, gives for the facts read here, each with
the time it lifts (or None when that is not known in advance); this module reads the
facts, words each blocker, and plans the next sends.
"""

# Long: the facts, their wording and the planner read one context (_Context), built once
# per call; apart, they would pass it across modules both ways.

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

from django.conf import settings
from django.db.models import Count, F, Min

from outreach.campaigns.windows import SendWindow, send_window_next_open, window_timezone
from outreach.domain_cap import counts as domain_cap
from outreach.domains.services import domain_check_summary
from outreach.enrollments.branching import waiting_at
from outreach.mailboxes.blockers import (
    CAMPAIGN,
    CODES,
    STANDING,
    Blocker,
    MailboxFacts,
    mailbox_blockers,
    takes_sends,
)
from outreach.mailboxes.pace import (
    daily_limit_in_force,
    next_utc_midnight,
    paced_until,
    sent_today,
    utc_day,
)
from outreach.mailboxes.secrets import secrets_hidden
from outreach.mailboxes.simulator_day import simulator_sent_today
from outreach.models.campaigns import Campaign, CampaignStep
from outreach.models.mailboxes import SmtpCredential
from outreach.models.reputation import ProviderPause
from outreach.models.sending import Enrollment

UPCOMING_MAX = 20
# A recorded error is at most ERROR_MAX_CHARS (1,000) already; the answer shows this much.
DETAIL_MAX_CHARS = 500
# Enrollments the plan considers, oldest next_send_at first: enough for the first
# UPCOMING_MAX sends of any mix of mailboxes, bounded whatever the campaign's size.
PLAN_ENROLLMENTS_MAX = 500
# Days the plan looks ahead for a mailbox's room under its daily limit.
PLAN_DAYS_MAX = 14


@dataclass(frozen=True)
class Reason:
    code: str
    until: datetime | None = None
    detail: str | None = None
    # A failure's: when it was recorded, and when the next attempt is planned.
    since: datetime | None = None
    retry_at: datetime | None = None
    # provider_paused: the recipient provider the mailbox is paused toward.
    provider: str | None = None


@dataclass
class _Context:
    campaign: Campaign
    now: datetime
    window: SendWindow | None
    enabled: list  # enabled mailbox ids of the campaign, in link order
    # mailbox id -> {contact time zone: due enrollments}; None collects the enrollments
    # without a usable thread mailbox, which any enabled mailbox of the campaign may take.
    due: dict = field(default_factory=dict)
    # mailbox id (or None, as above) -> the earliest next_send_at still ahead
    next_due: dict = field(default_factory=dict)
    # The recipient domain cap in force (outreach.domain_cap), and per mailbox waited for
    # (or None, as above) the domains whose enrollments wait for it: today's count is full.
    domain_cap: int | None = None
    domain_held: dict = field(default_factory=dict)
    # mailbox id -> the earliest send the plan gives it (its next attempt)
    first_planned: dict = field(default_factory=dict)
    # mailbox id -> the circuit breaker's pauses in force (outreach.sending.breaker)
    pauses: dict = field(default_factory=dict)

    def zones_due(self, credential: SmtpCredential) -> dict:
        zones = dict(self.due.get(credential.pk, {}))
        if credential.pk in self.enabled:
            for zone, count in self.due.get(None, {}).items():
                zones[zone] = zones.get(zone, 0) + count
        return zones

    def next_due_at(self, credential: SmtpCredential) -> datetime | None:
        candidates = [self.next_due.get(credential.pk)]
        if credential.pk in self.enabled:
            candidates.append(self.next_due.get(None))
        times = [t for t in candidates if t is not None]
        return min(times) if times else None


# --- the reasons: the scheduler's blockers, said --------------------------------------


def _facts(ctx: _Context, credential: SmtpCredential) -> MailboxFacts:
    """What the scheduler's rules (outreach.mailboxes.blockers) read of the mailbox, as
    this dry run has it for the whole campaign."""
    simulator_left = None
    if credential.is_simulator:
        sent = simulator_sent_today(ctx.campaign.account_id, ctx.now)
        simulator_left = settings.SIMULATOR_DAILY_LIMIT - sent
    return MailboxFacts(
        credential,
        ctx.campaign,
        ctx.now,
        unauthenticated=_unauthenticated(credential),
        simulator_left=simulator_left,
        window_opens=_window_opens(ctx, credential),
        domain_held=bool(_domains_held(ctx, credential)),
        due=bool(ctx.zones_due(credential)),
        next_due=ctx.next_due_at(credential),
    )


def _window_opens(ctx: _Context, credential: SmtpCredential) -> datetime:
    """The window's next opening for the contacts the mailbox has due (with contact time
    zones, each in its own zone; the earliest), or, with none due, in the campaign's."""
    zones = {
        window_timezone(campaign=ctx.campaign, contact_timezone=zone)
        for zone in ctx.zones_due(credential)
    } or {ctx.campaign.timezone}
    return min(send_window_next_open(ctx.now, timezone=z, window=ctx.window) for z in zones)


def _domains_held(ctx: _Context, credential: SmtpCredential) -> set:
    """The recipient domains whose day's count holds enrollments this mailbox would send
    (the scheduler moved them to the next UTC day)."""
    domains = set(ctx.domain_held.get(credential.pk, ()))
    if credential.pk in ctx.enabled:
        domains |= ctx.domain_held.get(None, set())
    return domains


def _said(ctx: _Context, credential: SmtpCredential, blocker: Blocker) -> Reason:
    """The blocker as the answer says it: its code and until, and a detail."""
    code, until = blocker
    detail = None
    since = None
    if code == "campaign_completed":
        detail = "Every enrollment has ended; dispatching new contacts restarts it."
    elif code == "campaign_paused":
        why = ctx.campaign.paused_reason or Campaign.PausedReason.MANUAL
        detail = f"Paused ({why}); resume it to send."
    elif code == "mailbox_disabled":
        detail = credential.disabled_reason or SmtpCredential.DisabledReason.MANUAL
    elif code == "complaint_rate":
        since = credential.paused_at
        detail = (
            "Paused: its spam complaints passed COMPLAINT_RATE_PAUSE_PERCENT of its sends of "
            "the last 30 days. PATCH /smtp_credentials/:id {paused_at: null} resumes it."
        )
    elif code == "reauthorization_required":
        detail = (
            "The provider refused the mailbox's grant: connect it again "
            "(POST /smtp_credentials/oauth)."
        )
    elif code == "domain_unauthenticated":
        check = credential.domain_check
        codes = ", ".join(f["code"] for f in check.findings if f["level"] == "error")
        detail = (
            f"The From domain {check.domain} fails its check ({codes}); the campaign "
            "requires an authenticated domain (GET /smtp_credentials/:id/domain_check)."
        )
    else:
        detail = _limit_detail(ctx, credential, code)
    return Reason(code, until=until, detail=detail, since=since)


def _limit_detail(ctx: _Context, credential: SmtpCredential, code: str) -> str | None:
    if code == "ramping_up":
        steps = credential.ramp_up or {}
        return (
            f"Ramp-up: {daily_limit_in_force(credential, utc_day(ctx.now))} sends today "
            f"(start_per_day {steps.get('start_per_day')}, increase_per_day "
            f"{steps.get('increase_per_day')}), below its daily_limit {credential.daily_limit}."
        )
    if code == "daily_limit_reached":
        return f"{daily_limit_in_force(credential, utc_day(ctx.now))} sends per UTC day."
    if code == "simulator_daily_limit":
        limit = settings.SIMULATOR_DAILY_LIMIT
        return f"{limit} simulator sends per account per UTC day (SIMULATOR_DAILY_LIMIT)."
    if code == "paced":
        return (
            f"{credential.min_interval_seconds} to {credential.max_interval_seconds} "
            "seconds between two sends of this mailbox."
        )
    if code == "recipient_domain_limit":
        shown = sorted(_domains_held(ctx, credential))
        more = f" and {len(shown) - 5} more" if len(shown) > 5 else ""
        return (
            f"{ctx.domain_cap} sends per recipient domain per UTC day reached for "
            f"{', '.join(shown[:5])}{more}."
        )
    return None  # window_closed, nothing_due: `until` says it


def _mailbox_unreachable(ctx: _Context, credential: SmtpCredential) -> Reason | None:
    """The mailbox's last attempt failed before any recipient was named: it could not
    connect or log in, its server refused its sender, or the outbound guard refused its
    host (its last_error, cleared by the next successful login). Not a blocker of the
    scheduler, which keeps giving the mailbox its sends (the retries, at the times the
    failure gave its enrollments): the batch sender's record, said beside them. Only for
    a mailbox that takes sends: a disabled one, or one to connect again, says so itself."""
    if not credential.last_error or credential.pk not in ctx.enabled:
        return None
    return Reason(
        "mailbox_unreachable",
        detail=secrets_hidden(credential.last_error, credential)[:DETAIL_MAX_CHARS],
        since=credential.last_error_at,
        retry_at=ctx.first_planned.get(credential.pk),
    )


def _reasons(ctx: _Context, credential: SmtpCredential) -> list[Reason]:
    """The scheduler's blockers of the mailbox (mailbox_blockers, in its order), with
    mailbox_unreachable after the campaign's and the mailbox's standing ones."""
    reasons = [_said(ctx, credential, b) for b in mailbox_blockers(_facts(ctx, credential))]
    unreachable = _mailbox_unreachable(ctx, credential)
    if unreachable is not None:
        at = sum(1 for r in reasons if CODES[r.code] in (CAMPAIGN, STANDING))
        reasons.insert(at, unreachable)
    return reasons


def provider_paused(ctx: _Context, credential: SmtpCredential) -> list[Reason]:
    """One reason per recipient provider the circuit breaker pauses the mailbox toward:
    it still sends to the others (so these alone leave can_send_now true)."""
    return [
        Reason("provider_paused", until=p.until, detail=p.detail, provider=p.provider)
        for p in sorted(ctx.pauses.get(credential.pk, ()), key=lambda p: p.provider)
    ]


# --- the answer ----------------------------------------------------------------------


def _active_enrollments(campaign: Campaign):
    """Enrollments the scheduler may still send: due statuses, contact not suppressed."""
    return Enrollment.objects.filter(
        campaign=campaign,
        status__in=Enrollment.DUE_STATUSES,
        next_send_at__isnull=False,
        contact__unsubscribed_at__isnull=True,
        contact__bounced_at__isnull=True,
    )


def _thread_key(credential_id, enabled: list):
    """The mailbox an enrollment waits for: its thread's while that is usable, else None
    (any enabled mailbox of the campaign)."""
    return credential_id if credential_id in enabled else None


def sending_status(*, campaign: Campaign, now: datetime) -> dict:
    links = Campaign.credentials.through.objects.filter(campaign=campaign).order_by("id")
    credentials = [
        link.smtpcredential
        for link in links.select_related("smtpcredential", "smtpcredential__domain_check")
    ]
    # The mailboxes the scheduler gives work to: no standing blocker (takes_sends).
    enabled = [
        c.pk
        for c in credentials
        if takes_sends(MailboxFacts(c, campaign, now, unauthenticated=_unauthenticated(c)))
    ]
    ctx = _Context(
        campaign=campaign,
        now=now,
        window=SendWindow.from_json(campaign.send_window),
        enabled=enabled,
        pauses=_pauses_read(credentials, now),
    )
    # Claimed enrollments are in flight: not due, not planned.
    waiting = _active_enrollments(campaign).not_in_flight()
    _waiting_read(ctx, waiting)
    _domain_held_read(ctx, waiting)
    today = utc_day(now)
    planned = []
    if campaign.status == Campaign.Status.ACTIVE and enabled:
        planned = _plan(ctx, {c.pk: c for c in credentials if c.pk in enabled}, waiting)
    for item in planned:  # earliest first
        ctx.first_planned.setdefault(item["credential_id"], item["earliest_at"])
    mailboxes = [_mailbox_status(ctx, credential, today) for credential in credentials]
    blockers = {
        box["credential_id"]: reason
        for box in mailboxes
        for reason in box["reasons"]
        if reason["code"] == "mailbox_unreachable"
    }
    upcoming = [
        {**item, "blocker": blockers.get(item["credential_id"])} for item in planned[:UPCOMING_MAX]
    ]
    upcoming += _waiting_on_branch(campaign, UPCOMING_MAX - len(upcoming))
    return {
        "campaign_id": campaign.pk,
        "status": campaign.status,
        "mailboxes": mailboxes,
        "upcoming": upcoming,
    }


def _waiting_on_branch(campaign: Campaign, limit: int) -> list[dict]:
    """Enrollments waiting at a branch (API.md 17), nearest deadline first, after the
    planned sends: no send is planned for them until the branch is decided (its event,
    or `until`, its deadline)."""
    if limit <= 0:
        return []
    rows = (
        Enrollment.objects.filter(waiting_at(), campaign=campaign)
        .order_by("branch_deadline", "pk")
        .values_list("pk", "contact__email", "current_key", "branch_deadline")[:limit]
    )
    return [
        {
            "enrollment_id": pk,
            "contact_email": email,
            "step": None,
            "key": key,
            "credential_id": None,
            "earliest_at": None,
            "reason": "waiting_on_branch",
            "until": deadline,
            "blocker": None,
        }
        for pk, email, key, deadline in rows
    ]


def _unauthenticated(credential: SmtpCredential) -> bool:
    """Its From domain check has an error (what credentials_unauthenticated reads)."""
    check = getattr(credential, "domain_check", None)
    return check is not None and check.has_errors


def _waiting_read(ctx: _Context, waiting) -> None:
    """Fill `ctx.due` (enrollments due now, per mailbox waited for and contact time zone)
    and `ctx.next_due` (the earliest later send, per mailbox waited for)."""
    for row in (
        waiting.filter(next_send_at__lte=ctx.now)
        .values("credential_id", zone=F("contact__timezone"))
        .annotate(count=Count("id"))
        .order_by()
    ):
        key = _thread_key(row["credential_id"], ctx.enabled)
        zones = ctx.due.setdefault(key, {})
        zones[row["zone"]] = zones.get(row["zone"], 0) + row["count"]
    for row in (
        waiting.filter(next_send_at__gt=ctx.now)
        .values("credential_id")
        .annotate(first=Min("next_send_at"))
        .order_by()
    ):
        key = _thread_key(row["credential_id"], ctx.enabled)
        if ctx.next_due.get(key) is None or row["first"] < ctx.next_due[key]:
            ctx.next_due[key] = row["first"]


def _domain_held_read(ctx: _Context, waiting) -> None:
    """Fill `ctx.domain_cap` and `ctx.domain_held` (no query beyond the cap's when no
    domain is full today)."""
    campaign = ctx.campaign
    ctx.domain_cap = domain_cap.cap_in_force(
        campaign.max_per_recipient_domain_per_day, campaign.account.max_per_recipient_domain_per_day
    )
    if ctx.domain_cap is None:
        return
    full = domain_cap.domain_counts(
        account_id=campaign.account_id, day=utc_day(ctx.now), at_least=ctx.domain_cap
    )
    if not full:
        return
    for credential_id, domain in domain_cap.enrollments_at_domains(waiting, full):
        ctx.domain_held.setdefault(_thread_key(credential_id, ctx.enabled), set()).add(domain)


def _pauses_read(credentials: list, now: datetime) -> dict:
    pauses: dict = defaultdict(list)
    for pause in ProviderPause.objects.filter(
        credential_id__in=[c.pk for c in credentials], until__gt=now
    ):
        pauses[pause.credential_id].append(pause)
    return pauses


def _reason_json(r: Reason) -> dict:
    shown = {"code": r.code, "until": r.until, "detail": r.detail}
    shown.update(since=r.since, retry_at=r.retry_at)
    return shown if r.provider is None else {**shown, "provider": r.provider}


def _mailbox_status(ctx: _Context, credential: SmtpCredential, today: date) -> dict:
    """One mailbox's entry: whether it can send now, and why not (the scheduler's
    blockers, then the providers it is paused toward)."""
    reasons = _reasons(ctx, credential)
    return {
        "credential_id": credential.pk,
        "from_email": credential.from_email,
        "can_send_now": not reasons,
        "reasons": [_reason_json(r) for r in reasons + provider_paused(ctx, credential)],
        "next_send_earliest_at": credential.next_send_earliest_at,
        "sent_today": sent_today(credential, today),
        "daily_limit": daily_limit_in_force(credential, today),
        "domain_check": domain_check_summary(getattr(credential, "domain_check", None)),
    }


@dataclass
class _Mailbox:
    """A mailbox's state as the plan goes: when it may send next, sends per UTC day."""

    credential: SmtpCredential
    free_at: datetime
    used: dict = field(default_factory=lambda: defaultdict(int))


def _email_positions(campaign: Campaign) -> dict[str, int]:
    """The campaign's email steps' positions by key (a branch sends nothing)."""
    rows = CampaignStep.objects.filter(campaign=campaign).values_list("key", "position", "branch")
    return {key: position for key, position, branch in rows if not branch}


def _plan(ctx: _Context, credentials: dict, waiting) -> list[dict]:
    """The scheduler's next sends, estimated: enrollments in next_send_at order, each
    given the earliest instant its mailbox (its thread's, or the campaign's mailbox free
    first) may send it: not before it is due, the mailbox's pace (its minimum gap, so
    these are the earliest times), its daily limit and the send window. Other campaigns
    sharing a mailbox may take some of its turns. All of them, earliest first (the
    answer shows UPCOMING_MAX; each mailbox's first is its next attempt)."""
    now = ctx.now
    positions = _email_positions(ctx.campaign)
    state = {}
    for pk, credential in credentials.items():
        paced = paced_until(credential, now)
        box = _Mailbox(credential=credential, free_at=paced or now)
        box.used[utc_day(now)] = sent_today(credential, utc_day(now))
        state[pk] = box
    rows = (
        waiting.annotate(email=F("contact__email"), zone=F("contact__timezone"))
        .order_by("next_send_at", "pk")
        .values_list(
            "pk", "email", "zone", "current_step", "credential_id", "next_send_at", "current_key"
        )
    )[:PLAN_ENROLLMENTS_MAX]
    rows = list(rows)
    by_domain = _domain_counts_today(ctx, rows, now)
    planned = []
    keys = {position: key for key, position in positions.items()}
    for pk, email, zone, current_step, credential_id, next_send_at, current_key in rows:
        # The step at its key; a row moved before enrollments had keys: the one after
        # its last sent (as the scheduler reads it).
        step = positions.get(current_key) if current_key else current_step + 1
        if step not in keys:
            continue
        zone = window_timezone(campaign=ctx.campaign, contact_timezone=zone)
        thread = _thread_key(credential_id, ctx.enabled)
        candidates = [thread] if thread is not None else ctx.enabled
        domain = domain_cap.capped_domain(email.lower()) if ctx.domain_cap is not None else None
        found = _first_slot(ctx, state, candidates, max(next_send_at, now), zone, domain, by_domain)
        if found is None:
            continue
        at, _, chosen = found
        if domain is not None:
            by_domain[domain, utc_day(at)] += 1
        box = state[chosen]
        box.used[utc_day(at)] += 1
        box.free_at = at + _min_gap(box.credential)
        planned.append(
            {
                "enrollment_id": pk,
                "contact_email": email,
                "step": step,
                "key": keys[step],
                "credential_id": chosen,
                "earliest_at": at,
            }
        )
    planned.sort(key=lambda item: item["earliest_at"])
    return planned


def _domain_counts_today(ctx: _Context, rows: list, now) -> dict:
    """Sends per (recipient domain, UTC day) under the cap, from today's counts."""
    by_domain: dict = defaultdict(int)
    if ctx.domain_cap is not None:
        domains = {d for row in rows if (d := domain_cap.capped_domain(row[1].lower()))}
        today = utc_day(now)
        counted = domain_cap.domain_counts(
            account_id=ctx.campaign.account_id, day=today, domains=domains
        )
        by_domain.update({(d, today): n for d, n in counted.items()})
    return by_domain


def _first_slot(ctx: _Context, state, candidates, after, zone, domain, by_domain):
    """(at, index, mailbox id) of the earliest slot among `candidates` on a UTC day whose
    count for the recipient `domain` (None: not capped) is below the cap; None if none
    within PLAN_DAYS_MAX days."""
    for _ in range(PLAN_DAYS_MAX):
        slots = [
            (slot_at, index, pk)
            for index, pk in enumerate(candidates)
            if (slot_at := _slot(state[pk], after, zone, ctx.window)) is not None
        ]
        if not slots:
            return None
        earliest = min(slots)
        if domain is None or by_domain[domain, utc_day(earliest[0])] < (ctx.domain_cap or 0):
            return earliest
        after = next_utc_midnight(earliest[0])  # the domain's day is full: the next one
    return None


def _min_gap(credential: SmtpCredential) -> timedelta:
    return timedelta(seconds=credential.min_interval_seconds if credential.is_paced else 0)


def _slot(box: _Mailbox, after: datetime, zone: str, window) -> datetime | None:
    """The earliest instant >= after at which the mailbox may send into the window, or
    None when its daily limit leaves no room within PLAN_DAYS_MAX days."""
    at = max(after, box.free_at)
    for _ in range(PLAN_DAYS_MAX):
        at = send_window_next_open(at, timezone=zone, window=window)
        if box.used[utc_day(at)] < daily_limit_in_force(box.credential, utc_day(at)):
            return at
        at = next_utc_midnight(at)
    return None
