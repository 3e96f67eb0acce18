"""Live edits of a campaign's steps (API.md 17): what an edit does to the enrollments on
their way through the sequence, previewed (`steps_preview`, writing nothing) and done
(`moves_apply`, in the edit's transaction) by the same reading.

Edits are by key. An enrollment at a key the edit keeps stays there (a kept email step's
new text goes into every email not yet sent; a kept branch keeps its deadline). One at
an element the edit removes goes to that element's old `next` (a removed branch: its
old `else`), on through removed elements the same way, to a kept element or the end
(outreach.campaigns.graph.edit_moves):

- a kept email step: its delay counts from the edit, to the send window's next opening
  (as the scheduler counts a step's delay from the previous send);
- a kept branch: it waits there from the edit, up to the branch's within_minutes;
- the end: `completed`.

A key the edit keeps but whose kind it changes (an email step made a branch, or the
reverse) is a new element under an old key: its enrollments arrive there as above, and
the move shows with `from_key` equal to `to_key`.

Only enrollments at a key (scheduled or sent: `current_key` set) move; a pending one is
at no element yet and starts at the first one when dispatched. An edit emits no event.

Sends in flight: a send claim names its step by position. An edit that changes which
element stands at a position (`positions_change`) gives back the campaign's claims that
no sender has started (`claims_give_back`, as a pause does: deleted, their units of the
mailbox's and the recipient domain's day returned once the edit commits), so those
emails are claimed again under the new graph. A claim already started (its message built, `sending_at` set, or
being set: its row is locked) goes out as claimed; the record of that send moves the
enrollment on.
"""

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Count, Exists, OuterRef, QuerySet

from outreach import enrollments
from outreach.campaigns import graph
from outreach.campaigns.branch_moves import branch_recheck_on_commit
from outreach.campaigns.followups import completed_followups_enqueue
from outreach.campaigns.state import campaigns_complete_if_done
from outreach.campaigns.windows import SendWindow, step_send_at, window_timezone
from outreach.domain_cap.counts import counts_release
from outreach.enrollments.branching import event_messages
from outreach.mailboxes.pace import reservation_release, utc_day
from outreach.models.campaigns import Campaign
from outreach.models.sending import Enrollment, SendClaim


@dataclass(frozen=True)
class Move:
    from_key: str
    to_key: str  # a key of the new steps, or graph.END
    enrollments: int

    def as_json(self) -> dict[str, Any]:
        return {"from_key": self.from_key, "to_key": self.to_key, "enrollments": self.enrollments}


def new_elements(steps: Sequence[dict[str, Any]]) -> list[graph.Element]:
    """The elements of resolved steps (step_serializers.steps_validate's output)."""
    return [
        graph.Element(
            key=step["key"],
            position=position,
            next=step.get("next_key", ""),
            branch=step.get("branch"),
            delay_minutes=step.get("delay_minutes", 0),
        )
        for position, step in enumerate(steps, start=1)
    ]


def _waiting(campaign: Campaign) -> QuerySet[Enrollment]:
    return Enrollment.objects.filter(
        campaign_id=campaign.pk, status__in=Enrollment.DUE_STATUSES, current_key__isnull=False
    )


def moves_plan(*, campaign: Campaign, steps: Sequence[dict[str, Any]]) -> list[Move]:
    """The moves replacing the campaign's steps with `steps` (resolved) makes: one per
    removed key some enrollment waits at, in the old order. One query for the counts."""
    old = graph.elements_from_rows(campaign.steps.all())
    targets = graph.edit_moves(old, new_elements(steps))
    if not targets:
        return []
    counts = dict(
        _waiting(campaign)
        .filter(current_key__in=list(targets))
        .order_by()
        .values("current_key")
        .annotate(n=Count("pk"))
        .values_list("current_key", "n")
    )
    return [Move(key, targets[key], counts[key]) for key in (e.key for e in old) if counts.get(key)]


def moves_apply(
    *, campaign: Campaign, moves: Sequence[Move], steps: Sequence[dict[str, Any]], now: datetime
) -> None:
    """Do `moves` (moves_plan's, read in this transaction), a few UPDATEs per moved key
    whatever the number of enrollments."""
    by_key = {element.key: element for element in new_elements(steps)}
    ended = False
    for move in moves:
        rows = _waiting(campaign).filter(current_key=move.from_key)
        target = by_key.get(move.to_key)
        if target is None:
            ids = list(rows.values_list("pk", flat=True)) if campaign.on_complete else []
            ended |= bool(enrollments.enrollments_complete_rows(rows, now=now))
            completed_followups_enqueue(campaign=campaign, enrollment_ids=ids)
        elif target.branch is not None:
            enrollments_arrive_at_branch(rows, branch=target, now=now)
        else:
            _to_step(campaign, rows, step=target, now=now)
    if ended:
        campaigns_complete_if_done(campaign_ids=[campaign.pk], at=now)


def positions_change(*, campaign: Campaign, steps: Sequence[dict[str, Any]]) -> bool:
    """Whether the edit puts another element (or none) at a position some element has."""
    before = dict(campaign.steps.values_list("position", "key"))
    after = {position: step["key"] for position, step in enumerate(steps, start=1)}
    return any(after.get(position) != key for position, key in before.items())


def claims_give_back(*, campaign: Campaign) -> int:
    """The campaign's open claims no sender has started, given back (module docstring).
    A claim whose row a sender holds (starting it now) is skipped: it goes out as
    claimed. The claims go in the edit's transaction (no sender can start one after the
    edit commits); their units of the mailboxes' and the recipient domains' days are
    returned right after it commits, each in a statement of its own: the edit then never
    holds a mailbox's row while it moves enrollments, which a sender recording a message
    locks in the other order (enrollment, then mailbox). Returns how many."""
    claims = list(
        SendClaim.objects.open()
        .filter(enrollment__campaign_id=campaign.pk, sending_at__isnull=True)
        .select_for_update(of=("self",), skip_locked=True)
        .only("pk", "credential_id", "claimed_at", "domain_count_id")
    )
    if not claims:
        return 0
    SendClaim.objects.filter(pk__in=[claim.pk for claim in claims]).delete()
    transaction.on_commit(lambda: _reservations_return(claims), robust=True)
    return len(claims)


def _reservations_return(claims: list[SendClaim]) -> None:
    """One UPDATE per mailbox and UTC day of the claims, one for their domain counts."""
    days: Counter = Counter()
    when: dict = {}
    for claim in claims:
        if claim.credential_id is not None:
            day = (claim.credential_id, utc_day(claim.claimed_at))
            days[day] += 1
            when.setdefault(day, claim.claimed_at)
    for day, count in days.items():
        reservation_release(credential_id=day[0], at=when[day], count=count)
    counts_release([claim.domain_count_id for claim in claims])


def enrollments_arrive_at_branch(rows: QuerySet, *, branch: graph.Element, now: datetime) -> int:
    """Enrollments an edit brings to a branch wait there from now, up to its
    within_minutes. The one place an edit places enrollments at a branch. Those whose
    open or click the branch waits for came already (found in one query) are decided
    `then` by the branch itself once the edit commits (branch_moves.branch_recheck: a
    decision of the branch, announced as any; the edit itself announces nothing)."""
    assert branch.branch is not None
    deadline = now + timedelta(minutes=branch.branch["within_minutes"])
    ids = list(rows.values_list("pk", flat=True))
    moved = enrollments.enrollments_wait_at_branch(rows, key=branch.key, deadline=deadline, now=now)
    met = Enrollment.objects.filter(pk__in=ids, current_key=branch.key).filter(
        Exists(event_messages(branch.branch, before=now).filter(enrollment_id=OuterRef("pk")))
    )
    for enrollment_id in met.values_list("pk", flat=True):
        branch_recheck_on_commit(enrollment_id=enrollment_id, branch_key=branch.key)
    return moved


def _to_step(campaign: Campaign, rows: QuerySet, *, step: graph.Element, now: datetime) -> None:
    """Due at the step's delay from now, in the send window: read in each contact's own
    time zone when the campaign sends so (one UPDATE per zone among them), else in the
    campaign's (one UPDATE)."""
    window = SendWindow.from_json(campaign.send_window)

    def send_at(contact_timezone: str) -> datetime:
        zone = window_timezone(campaign=campaign, contact_timezone=contact_timezone)
        return step_send_at(
            after=now, delay_minutes=step.delay_minutes, timezone=zone, window=window
        )

    if window is None or not campaign.send_in_contact_timezone:
        enrollments.enrollments_move_to_step(rows, key=step.key, send_at=send_at(""), now=now)
        return
    zones = set(rows.order_by().values_list("contact__timezone", flat=True).distinct())
    for zone in sorted(zones):
        enrollments.enrollments_move_to_step(
            rows.filter(contact__timezone=zone), key=step.key, send_at=send_at(zone), now=now
        )
