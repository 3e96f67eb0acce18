"""Why a mailbox of a campaign is given no send now: the scheduler's rules, written once.

`mailbox_blockers(facts)` is the one decision function: given what its caller has read
already (the mailbox's row, the campaign, the clock, and the few counts below), it returns
the mailbox's blockers as `Blocker(code, until)` pairs, `until` being when the blocker
lifts (None when that is not known in advance), in the order of `RULES`. Two callers:

- the scheduler (outreach.sending.scheduler) gives a claim only to a mailbox without a
  blocker that holds it (`HOLDS`: `mailbox_usable`), and when the mailbox a due
  enrollment goes to meets a blocker that defers it (`DEFERS`: its daily limit, its
  account's simulator day), the enrollment waits until that blocker's `until` (then the
  send window's opening);
- GET /campaigns/:id/sending_status (outreach.campaigns.sending_status) lists every
  blocker of each mailbox as its reasons, with the facts it reads for the whole campaign
  (the window's next opening for what the mailbox has due, the recipient domains held
  for it, whether anything is due).

A fact a caller has not read is left at its default, and the rules that need it do not
apply: the scheduler decides the send window and the recipient domain cap per
enrollment, before and after it chooses a mailbox, with `window_closed` and
`recipient_domain_full` below.

The scheduler also filters in SQL (`_mailbox_free`: disabled, complaint guard, pace) so
that the enrollments of a mailbox that cannot send are never read; those filters must say
what `mailbox_disabled`, `complaint_rate` and `paced` say
(tests/outreach/test_mailbox_blockers.py holds them to it).
"""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

from django.conf import settings

from outreach.mailboxes.pace import next_utc_midnight, paced_until, ramp_limit, room_today, utc_day
from outreach.models.campaigns import Campaign
from outreach.models.mailboxes import SmtpCredential


class Blocker(NamedTuple):
    code: str
    until: datetime | None = None


@dataclass(frozen=True, slots=True)
class MailboxFacts:
    """What a caller has read of one mailbox of one campaign."""

    mailbox: SmtpCredential
    campaign: Campaign
    now: datetime
    # Sends left today under the daily limit in force; None: from the row (room_today).
    # The scheduler passes its transaction's count, less the claims it made.
    room: int | None = None
    # The mailbox's From domain check has an error (outreach.domains).
    unauthenticated: bool = False
    # The account's simulator sends left today (SIMULATOR_DAILY_LIMIT); None: not read.
    simulator_left: int | None = None
    # When the send window next opens for what the mailbox has due; None: not read.
    window_opens: datetime | None = None
    # Enrollments it would send wait for a recipient domain whose day's count is full.
    domain_held: bool = False
    # Whether an enrollment is due for it (None: not read), and the next that falls due.
    due: bool | None = None
    next_due: datetime | None = None


Rule = Callable[[MailboxFacts], Blocker | None]


def campaign_completed(f: MailboxFacts) -> Blocker | None:
    return Blocker("campaign_completed") if f.campaign.status == Campaign.Status.COMPLETED else None


def campaign_paused(f: MailboxFacts) -> Blocker | None:
    return Blocker("campaign_paused") if f.campaign.status == Campaign.Status.PAUSED else None


def mailbox_disabled(f: MailboxFacts) -> Blocker | None:
    return Blocker("mailbox_disabled") if f.mailbox.disabled_at is not None else None


def complaint_rate(f: MailboxFacts) -> Blocker | None:
    """Paused by the complaint guard (outreach.sending.complaints) until resumed."""
    paused = f.mailbox.paused_at is not None and f.mailbox.disabled_at is None
    return Blocker("complaint_rate") if paused else None


def reauthorization_required(f: MailboxFacts) -> Blocker | None:
    """An OAuth mailbox whose grant the provider refused: no claims until connected again
    (its enrollments wait, SENDING_CREDENTIAL_RETRY_SECONDS at a time)."""
    refused = f.mailbox.oauth_status == SmtpCredential.OAuthStatus.REAUTHORIZATION_REQUIRED
    return Blocker("reauthorization_required") if refused else None


def domain_unauthenticated(f: MailboxFacts) -> Blocker | None:
    """Only where it holds sends: a campaign with require_authenticated_domain."""
    held = f.campaign.require_authenticated_domain and f.unauthenticated
    return Blocker("domain_unauthenticated") if held else None


def daily_limit_reached(f: MailboxFacts) -> Blocker | None:
    """No room left today under the limit in force: `ramping_up` when the ramp-up's
    limit of the day is below the mailbox's own."""
    if f.room is not None and f.room > 0:  # the scheduler's count, per due enrollment
        return None
    today = utc_day(f.now)
    if f.room is None and room_today(f.mailbox, today) > 0:
        return None
    ramp = ramp_limit(f.mailbox, today)
    ramping = ramp is not None and ramp < min(f.mailbox.daily_limit, settings.DAILY_LIMIT_MAX)
    return Blocker("ramping_up" if ramping else "daily_limit_reached", next_utc_midnight(f.now))


def simulator_daily_limit(f: MailboxFacts) -> Blocker | None:
    """A simulator mailbox, once the account's simulator sends of the day are made."""
    if f.simulator_left is None or f.simulator_left > 0 or not f.mailbox.is_simulator:
        return None
    return Blocker("simulator_daily_limit", next_utc_midnight(f.now))


def paced(f: MailboxFacts) -> Blocker | None:
    until = paced_until(f.mailbox, f.now)
    return Blocker("paced", until) if until is not None else None


def window_closed(f: MailboxFacts) -> Blocker | None:
    opens = f.window_opens
    return Blocker("window_closed", opens) if opens is not None and opens > f.now else None


def recipient_domain_full(f: MailboxFacts) -> Blocker | None:
    """The recipient domain cap (outreach.domain_cap): its day's count is reached."""
    return Blocker("recipient_domain_limit", next_utc_midnight(f.now)) if f.domain_held else None


def nothing_due(f: MailboxFacts) -> Blocker | None:
    """No enrollment is due for it; a mailbox that takes no sends (a STANDING blocker)
    is given none at all, so this is not said of it."""
    if f.due is not False or not takes_sends(f):
        return None
    return Blocker("nothing_due", f.next_due)


# The table: each rule with what the scheduler does when it holds, in the order
# sending_status reports them.
CAMPAIGN = "campaign"  # the campaign is not active: the scheduler's scan never reads it
STANDING = "standing"  # the mailbox takes no sends until someone acts (none is planned)
HOLDS = "holds"  # the mailbox takes no claim until `until` (its enrollments stay due)
DEFERS = "defers"  # the enrollment sent from it waits until `until`, then the window
ENROLLMENT = "enrollment"  # decided per due enrollment, before a mailbox is chosen
STATUS = "status"  # nothing to decide: said by sending_status alone

RULES: tuple[tuple[Rule, str], ...] = (
    (campaign_completed, CAMPAIGN),
    (campaign_paused, CAMPAIGN),
    (mailbox_disabled, STANDING),
    (complaint_rate, STANDING),
    (reauthorization_required, STANDING),
    (domain_unauthenticated, STANDING),
    (daily_limit_reached, DEFERS),
    (simulator_daily_limit, DEFERS),
    (paced, HOLDS),
    (window_closed, ENROLLMENT),
    (recipient_domain_full, DEFERS),
    (nothing_due, STATUS),
)
# Every code a rule gives, with its kind.
CODES: dict[str, str] = {
    "campaign_completed": CAMPAIGN,
    "campaign_paused": CAMPAIGN,
    "mailbox_disabled": STANDING,
    "complaint_rate": STANDING,
    "reauthorization_required": STANDING,
    "domain_unauthenticated": STANDING,
    "daily_limit_reached": DEFERS,
    "ramping_up": DEFERS,
    "simulator_daily_limit": DEFERS,
    "paced": HOLDS,
    "window_closed": ENROLLMENT,
    "recipient_domain_limit": DEFERS,
    "nothing_due": STATUS,
}
_STANDING = tuple(rule for rule, kind in RULES if kind == STANDING)
_UNUSABLE = tuple(rule for rule, kind in RULES if kind in (CAMPAIGN, STANDING, HOLDS))
_DEFERRING = tuple(rule for rule, kind in RULES if kind == DEFERS)


def mailbox_blockers(facts: MailboxFacts) -> list[Blocker]:
    """Every blocker of the mailbox, in the order of RULES."""
    return [blocker for rule, _ in RULES if (blocker := rule(facts)) is not None]


def takes_sends(facts: MailboxFacts) -> bool:
    """No STANDING blocker: the scheduler gives it sends, now or later (its threads keep
    it, and a new thread may rotate to it)."""
    return not any(rule(facts) is not None for rule in _STANDING)


def mailbox_usable(facts: MailboxFacts) -> bool:
    """Whether the scheduler may choose the mailbox for a due enrollment of the campaign
    now: no CAMPAIGN, STANDING or HOLDS blocker."""
    return not any(rule(facts) is not None for rule in _UNUSABLE)


def deferral(facts: MailboxFacts) -> Blocker | None:
    """The first DEFERS blocker of the mailbox chosen for a due enrollment, or None."""
    for rule in _DEFERRING:
        if (blocker := rule(facts)) is not None:
            return blocker
    return None
