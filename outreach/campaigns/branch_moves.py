"""An enrollment's moves through its campaign's graph outside a send (API.md 17): the
branch it waits at decided by an open or click (`message_event_record`), by its
deadline (`branch_deadlines_decide`, each scheduler run), or on arrival by an event
recorded meanwhile (`branch_recheck`, also for enrollments a live edit of the steps
brings to a branch: outreach.campaigns.edits). The graph and its writes are
outreach.enrollments.branching's; this module adds when a step reached goes out (its
delay from the move, in the campaign's send window) and what follows a move (a
completed campaign, the scheduler rung for a step due now).

Decided once: every decision locks the enrollment's row and moves it only while it
still waits at that branch (a conditional UPDATE), so an event and the deadline, or two
schedulers, racing for one enrollment make one decision; the loser changes nothing.
The deadline's scan takes its rows with SKIP LOCKED, so two runs never wait on each
other, and a run killed before its commit decided nothing: the next run finds the same
rows (their deadline still passed, the partial index still lists them).
"""

import logging
from collections import Counter
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from outreach.campaigns.dispatch import sends_schedule_soon
from outreach.campaigns.followups import completions_followup
from outreach.campaigns.state import campaigns_complete_if_done
from outreach.campaigns.windows import SendWindow, step_send_at, window_timezone
from outreach.enrollments import counting
from outreach.enrollments.branching import (
    ELSE,
    END,
    THEN,
    Graph,
    Move,
    SendAt,
    branch_counts_write,
    branch_move,
    decide,
    decisions_record,
    event_happened,
    event_meets,
    is_branch,
    waiting_at,
    walk,
)
from outreach.models.campaigns import Campaign, CampaignStep
from outreach.models.sending import Enrollment

logger = logging.getLogger(__name__)


def send_at_of(campaign: Campaign, contact_timezone: str, now: datetime) -> SendAt:
    """When an email step reached now goes out: its delay from now, then the next
    opening of the campaign's send window (in the contact's zone when it sends so). Read
    only when a walk reaches an email step (once at most): one to a branch or to the
    end needs neither."""

    def send_at(step: CampaignStep) -> datetime:
        return step_send_at(
            after=now,
            delay_minutes=step.delay_minutes,
            timezone=window_timezone(campaign=campaign, contact_timezone=contact_timezone),
            window=SendWindow.from_json(campaign.send_window),
        )

    return send_at


def _after(enrollment: Enrollment, move: Move, now: datetime, *, run: set | None = None) -> None:
    """What follows a move, in its transaction (its branch counts written first): the
    campaign may be done; a step due now rings the scheduler once this commits. In a
    scheduler run's batch (`run`: the campaigns to complete after the batch's counts),
    nothing rings: the run claims what its decisions made due."""
    if move.status == Enrollment.Status.COMPLETED:
        completions_followup([enrollment])  # its on_complete rule, if any
        if run is not None:
            run.add(enrollment.campaign_id)
        else:
            campaigns_complete_if_done(campaign_ids=[enrollment.campaign_id], at=now)
    elif run is None and move.next_send_at is not None and move.next_send_at <= now:
        transaction.on_commit(sends_schedule_soon, robust=True)


def _locked_waiting(rows) -> list[Enrollment]:
    return list(
        rows.select_related("contact", "campaign").select_for_update(of=("self",), no_key=True)
    )


def _decide_one(
    enrollment: Enrollment,
    graph: Graph,
    *,
    outcome: str | None,
    now: datetime,
    tally: Counter | None = None,
    completed: set | None = None,
) -> bool:
    """Decide the branch a locked, waiting `enrollment` is at: `outcome`, or (None) `then`
    when its event was recorded before now and `else` otherwise. Whether it moved."""
    key = enrollment.current_key
    element = graph.get(key)
    if key is None or not is_branch(element):
        # The branch is gone (an edit moves its enrollments in its own transaction).
        return False
    assert element is not None and element.branch is not None
    if outcome is None:
        happened = event_happened(element.branch, enrollment_id=enrollment.pk, before=now)
        outcome = THEN if happened else ELSE
    move = decide(
        graph,
        key,
        outcome,
        enrollment_id=enrollment.pk,
        now=now,
        send_at=send_at_of(enrollment.campaign, enrollment.contact.timezone, now),
        held_until=enrollment.held_until,
    )
    if not branch_move(enrollment_id=enrollment.pk, branch_key=key, move=move, now=now):
        return False
    decisions_record(enrollment, move.decisions, at=now, tally=tally)
    _after(enrollment, move, now, run=completed)
    return True


def branch_decide(
    *, enrollment_id, branch_key: str, outcome: str | None = None, now: datetime | None = None
) -> bool:
    """Decide the branch `branch_key` of an enrollment waiting at it (see _decide_one),
    in one transaction. False when it no longer waits there."""
    now = now or timezone.now()
    with transaction.atomic(), counting():
        rows = Enrollment.objects.filter(waiting_at(branch_key), pk=enrollment_id)
        locked = _locked_waiting(rows)
        if not locked:
            return False
        enrollment = locked[0]
        return _decide_one(
            enrollment, Graph.of_campaign(enrollment.campaign_id), outcome=outcome, now=now
        )


def branch_recheck(*, enrollment_id, branch_key: str) -> bool:
    """After a send left an enrollment waiting at `branch_key` (committed): an event
    recorded while that send was being recorded found it not waiting yet; decide it
    `then` now if so. Whether it moved. Without this, the deadline would still find the
    event (it decides `then` when the event came): this only makes it at once."""
    now = timezone.now()
    branch = _branch_of(enrollment_id=enrollment_id, branch_key=branch_key)
    if branch is None or not event_happened(branch, enrollment_id=enrollment_id, before=now):
        return False
    return branch_decide(enrollment_id=enrollment_id, branch_key=branch_key, outcome=THEN, now=now)


def _branch_of(*, enrollment_id, branch_key: str) -> dict | None:
    """The condition of the branch `branch_key` of the enrollment's campaign, or None
    when the campaign has no branch of that key (an edit removed it)."""
    element = CampaignStep.objects.filter(
        key=branch_key, campaign__enrollments__pk=enrollment_id
    ).first()
    return element.branch if element is not None and element.branch else None


def branch_recheck_on_commit(*, enrollment_id, branch_key: str) -> None:
    """`branch_recheck` once the caller's transaction (a send's record) commits."""
    transaction.on_commit(
        lambda: branch_recheck(enrollment_id=enrollment_id, branch_key=branch_key), robust=True
    )


def sent_move(
    *,
    position: int,
    enrollment: Enrollment,
    campaign: Campaign,
    steps: dict[int, CampaignStep],
    now: datetime,
) -> Move:
    """Where the send of the step at `position` (of `steps`, by position) moves the
    enrollment: past the step (its key in the path), to the element the step leads to,
    as `walk` goes: the next email step's send (its delay from now, in the window), a
    branch (decided at once when its event came already, else waited at), or the end."""
    graph = Graph(steps.values())
    step = steps.get(position)
    key = step.key if step is not None else f"step_{position}"
    following = graph.after(step) if step is not None else END
    return walk(
        graph,
        following,
        enrollment_id=enrollment.pk,
        now=now,
        send_at=send_at_of(campaign, enrollment.contact.timezone, now),
        passed=[key],
    )


def branch_deadlines_decide(*, now: datetime | None = None) -> int:
    """Enrollments whose branch deadline passed, decided (`else`, or `then` when the
    event came after all), found through enrollment_branch_deadline_idx in transactions
    of SENDING_BATCH_SIZE, up to SENDING_MAX_PER_TICK a run. Returns how many moved."""
    now = now or timezone.now()
    moved = 0
    while moved < settings.SENDING_MAX_PER_TICK:
        examined, decided = _deadlines_once(now, settings.SENDING_BATCH_SIZE)
        moved += decided
        if examined < settings.SENDING_BATCH_SIZE:
            break
    return moved


def _deadlines_once(now: datetime, limit: int) -> tuple[int, int]:
    """One transaction of branch_deadlines_decide: (examined, moved). Its counts are
    gathered (`counting`) only when a deadline passed: a run usually finds none."""
    with transaction.atomic():
        rows = (
            Enrollment.objects.filter(waiting_at(), branch_deadline__lte=now)
            .order_by("branch_deadline")
            .select_for_update(of=("self",), no_key=True, skip_locked=True)
        )
        due = list(rows.select_related("contact", "campaign")[:limit])
        if not due:
            return 0, 0
        with counting():
            graphs: dict = {}
            decided = 0
            tally: Counter = Counter()
            completed: set = set()
            for enrollment in due:
                if enrollment.campaign_id not in graphs:
                    graphs[enrollment.campaign_id] = Graph.of_campaign(enrollment.campaign_id)
                graph = graphs[enrollment.campaign_id]
                decided += _decide_one(
                    enrollment, graph, outcome=None, now=now, tally=tally, completed=completed
                )
            # The lock order of every decision: the branches' counts, then the campaigns.
            branch_counts_write(tally)
            if completed:
                campaigns_complete_if_done(campaign_ids=completed, at=now)
    return len(due), decided


def branch_event(*, enrollment_id, branch_key: str, kind: str, step_key: str, at: datetime) -> bool:
    """The first open or click (`kind`) of an enrollment's message of step `step_key`
    was just recorded, the enrollment waiting at `branch_key` when it was: when the
    event meets that branch's condition, the branch is decided `then` (branch_decide:
    only while it still waits there). Whether it moved."""
    branch = _branch_of(enrollment_id=enrollment_id, branch_key=branch_key)
    if branch is None or not event_meets(branch, kind=kind, step_key=step_key):
        return False
    return branch_decide(enrollment_id=enrollment_id, branch_key=branch_key, outcome=THEN, now=at)
