"""Where an enrollment goes next in its campaign's graph (API.md 17), and the writes
of a branch's decision.

A campaign's steps are a small graph: each email step leads to its `next_key` (a key,
or "end"; a row without one leads to the element at the next position), a branch to
its `then` or its `else`. `walk` follows the graph from an element the enrollment
reaches ("arrives at"): an email step is where it waits for its send (due after the
step's delay, in the send window); "end" completes it; a branch whose event already
happened (an open or click of the message it names, recorded before now) is decided
`then` at once and the walk goes on; any other branch is where it waits, up to the
branch's deadline. The graph has no cycle (validated at save), and a walk never takes
more steps than the graph has elements.

`branch_move` writes a decision of a waiting enrollment: a conditional UPDATE of the
row still waiting at that branch, so of an event and a deadline racing for it (or two
schedulers), one moves it and the other changes nothing. The decisions counted
(BranchStats) and announced (`enrollment.branched`) are those the winning write made,
in its transaction.

This module knows the graph and the rows; when a step goes out (the delay in the send
window) is the campaigns' rule, passed in as `send_at`.
"""

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.db import connection
from django.db.models import Count, F, Func, JSONField, Q, QuerySet, Sum, Value

from config.db.counters import counter_shard
from config.timestamps import utc_timestamp
from outreach.events import enrollment_branched_emit
from outreach.models.branches import BranchDecision
from outreach.models.campaigns import BranchStats, CampaignStep
from outreach.models.sending import Enrollment, Message

END = "end"
THEN = "then"
ELSE = "else"
ANY = "any"

Status = Enrollment.Status


class Graph:
    """A campaign's elements by key and by position."""

    def __init__(self, steps: Iterable[CampaignStep]):
        self.by_position = {step.position: step for step in steps}
        self.by_key = {step.key: step for step in self.by_position.values()}

    @classmethod
    def of_campaign(cls, campaign_id) -> "Graph":
        return cls(CampaignStep.objects.filter(campaign_id=campaign_id))

    def first_key(self) -> str | None:
        if not self.by_position:
            return None
        return self.by_position[min(self.by_position)].key

    def after(self, step: CampaignStep) -> str:
        """The key an email step leads to: its `next_key`, or (a row made without one)
        the element at the next position, or "end"."""
        if step.next_key:
            return step.next_key
        following = self.by_position.get(step.position + 1)
        return following.key if following is not None else END

    def get(self, key: str | None) -> CampaignStep | None:
        return self.by_key.get(key) if key else None

    def has_branches(self) -> bool:
        return any(step.branch for step in self.by_position.values())


def leads_to_email(steps: dict[int, CampaignStep], position: int) -> bool:
    """Whether the step at `position` (of `steps`, by position) leads to an email step:
    its send leaves the enrollment due again. (Through a branch, or to the end, the
    enrollment may end.)"""
    step = steps.get(position)
    if step is None:
        return False
    if not step.next_key:
        following = steps.get(position + 1)
        return following is not None and not following.branch
    return any(s.key == step.next_key and not s.branch for s in steps.values())


def is_branch(step: CampaignStep | None) -> bool:
    return step is not None and bool(step.branch)


# --- the condition -------------------------------------------------------------------------


def _kinds(branch: Mapping[str, Any]) -> tuple[str, ...]:
    on = branch.get("on", "opened")
    return ("opened", "clicked") if on == "opened_or_clicked" else (on,)


def event_meets(branch: dict, *, kind: str, step_key: str) -> bool:
    """Whether an open or click (`kind`) of the message of step `step_key` meets the
    branch's condition."""
    of = branch.get("of", ANY)
    return kind in _kinds(branch) and of in (ANY, step_key)


def event_messages(branch: Mapping[str, Any], *, before: datetime) -> QuerySet[Message]:
    """The messages whose open or click (as `on` says), recorded before `before`, meets
    the branch: of step `of`, or any; filter by enrollment (or OuterRef("pk"))."""
    condition = Q()
    for kind in _kinds(branch):
        condition |= Q(**{f"{kind}_at__lt": before})
    messages = Message.objects.filter(condition)
    of = branch.get("of", ANY)
    return messages if of == ANY else messages.filter(step_key=of)


def event_happened(branch: dict, *, enrollment_id, before: datetime) -> bool:
    """Whether the branch's event was recorded before `before`: an open or click (as
    `on` says) of the enrollment's message of step `of`, or of any of its messages."""
    return event_messages(branch, before=before).filter(enrollment_id=enrollment_id).exists()


# --- the walk ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    branch_key: str
    outcome: str  # THEN | ELSE
    next_key: str


@dataclass
class Move:
    """Where a walk left the enrollment: waiting for an email step's send
    (`next_send_at`), waiting at a branch (`branch_deadline`), or completed; the keys
    it passed (`path`, appended to the enrollment's) and the branches it decided."""

    current_key: str | None
    status: str
    next_send_at: datetime | None = None
    completed_at: datetime | None = None
    branch_deadline: datetime | None = None
    path: list[str] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)

    @property
    def waiting(self) -> bool:
        return self.branch_deadline is not None

    def columns(self) -> dict:
        """The enrollment's columns after the move (its path apart)."""
        return {
            "status": self.status,
            "current_key": self.current_key,
            "next_send_at": self.next_send_at,
            "completed_at": self.completed_at,
            "branch_deadline": self.branch_deadline,
            "held_until": None,
        }


SendAt = Callable[[CampaignStep], datetime]


def walk(
    graph: Graph,
    key: str,
    *,
    enrollment_id,
    now: datetime,
    send_at: SendAt,
    held_until: datetime | None = None,
    passed: Iterable[str] = (),
    decisions: Iterable[Decision] = (),
) -> Move:
    """The enrollment arrives at `key` now (see the module docstring). `held_until`: an
    out-of-office return met while it waited; the email step reached is not due before
    it. `passed` and `decisions`: what the move made before this arrival."""
    path, decided = list(passed), list(decisions)
    for _ in range(len(graph.by_key) + 1):
        element = graph.get(key)
        if key == END or element is None:
            # "end", or a key no element has any more: nothing left to send.
            return Move(None, Status.COMPLETED, completed_at=now, path=path, decisions=decided)
        if not element.branch:
            due = send_at(element)
            if held_until is not None and held_until > due:
                due = held_until
            return Move(key, Status.SENT, next_send_at=due, path=path, decisions=decided)
        branch = element.branch
        if not event_happened(branch, enrollment_id=enrollment_id, before=now):
            deadline = now + timedelta(minutes=int(branch["within_minutes"]))
            return Move(key, Status.SENT, branch_deadline=deadline, path=path, decisions=decided)
        target = branch.get(THEN) or END
        path.append(key)
        decided.append(Decision(key, THEN, target))
        key = target
    raise ValueError(f"the graph of {graph.first_key()!r} has a cycle")  # validated away


def decide(
    graph: Graph,
    branch_key: str,
    outcome: str,
    *,
    enrollment_id,
    now: datetime,
    send_at: SendAt,
    held_until: datetime | None = None,
) -> Move:
    """The move of an enrollment waiting at `branch_key` decided `outcome` now: to the
    branch's then or else, and on (walk)."""
    branch = graph.by_key[branch_key].branch or {}
    target = branch.get(outcome) or END
    return walk(
        graph,
        target,
        enrollment_id=enrollment_id,
        now=now,
        send_at=send_at,
        held_until=held_until,
        passed=[branch_key],
        decisions=[Decision(branch_key, outcome, target)],
    )


# --- the writes ----------------------------------------------------------------------------


class Appended(Func):
    """`path || '[...]'::jsonb`: keys appended to an enrollment's path in its UPDATE."""

    arg_joiner = " || "
    template = "%(expressions)s"
    output_field = JSONField()


def path_appended(keys: list[str]) -> Appended:
    return Appended(F("path"), Value(keys, output_field=JSONField()))


def waiting_at(branch_key: str | None = None) -> Q:
    """Enrollments waiting at a branch (at `branch_key`, when given)."""
    waiting = Q(status=Status.SENT, branch_deadline__isnull=False)
    if branch_key is not None:
        waiting &= Q(current_key=branch_key)
    return waiting


def branch_move(*, enrollment_id, branch_key: str, move: Move, now: datetime) -> bool:
    """Move an enrollment still waiting at `branch_key` (`move`: `decide`'s). Returns
    whether it moved: False when an event, a deadline, an edit or the contact decided
    or ended it first. The caller counts and announces (`decisions_record`)."""
    return bool(
        Enrollment.objects.filter(waiting_at(branch_key), pk=enrollment_id).update(
            **move.columns(), path=path_appended(move.path), updated_at=now
        )
    )


def decisions_record(
    enrollment: Enrollment, decisions: list[Decision], *, at: datetime, tally: Counter | None = None
) -> None:
    """Keep each decision (BranchDecision, the thread's), count it in its branch's stats
    and announce it (enrollment.branched), in the transaction that moved the enrollment
    (`enrollment.contact` and `enrollment.campaign` loaded). With `tally`, the counts
    are added there, for the caller to write once (`branch_counts_write`)."""
    if not decisions:
        return
    BranchDecision.objects.bulk_create(
        BranchDecision(
            enrollment_id=enrollment.pk,
            key=d.branch_key,
            outcome=d.outcome,
            next_key=d.next_key,
            decided_at=at,
        )
        for d in decisions
    )
    counts = tally if tally is not None else Counter()
    for decision in decisions:
        counts[enrollment.campaign_id, decision.branch_key, decision.outcome] += 1
        enrollment_branched_emit(
            enrollment=enrollment,
            branch_key=decision.branch_key,
            outcome=decision.outcome,
            next_key=decision.next_key,
        )
    if tally is None:
        branch_counts_write(counts)


def branch_counts_write(tally: Counter) -> None:
    """Decisions counted, `{(campaign id, key, outcome): n}`: one row of each branch
    written, in (campaign, key) order, so that transactions writing several never lock
    two rows in opposite orders."""
    merged: dict = defaultdict(lambda: [0, 0])
    for (campaign_id, key, outcome), n in tally.items():
        merged[campaign_id, key][outcome == ELSE] += n
    for campaign_id, key in sorted(merged, key=lambda k: (str(k[0]), k[1])):
        then_n, else_n = merged[campaign_id, key]
        branch_count(campaign_id, key, then=then_n, else_=else_n)


def held(*, enrollment_id, until: datetime, now: datetime) -> bool:
    """An out-of-office return met while the enrollment waits at a branch: the step
    the branch leads to is not due before `until` (raised, never lowered)."""
    rows = Enrollment.objects.filter(waiting_at(), pk=enrollment_id)
    rows = rows.filter(Q(held_until__isnull=True) | Q(held_until__lt=until))
    return bool(rows.update(held_until=until, updated_at=now))


# --- the branches' stats -------------------------------------------------------------------


def branch_count(campaign_id, key: str, *, then: int = 0, else_: int = 0) -> None:
    """Decisions of the branch `key` (negative: taken back), added to a shard of its
    counts."""
    table = BranchStats._meta.db_table
    campaign = BranchStats._meta.get_field("campaign")
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} AS t (campaign_id, key, shard, then_count, else_count)"  # noqa: S608 - the code's own names
            " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (campaign_id, key, shard)"
            " DO UPDATE SET then_count = t.then_count + excluded.then_count,"
            " else_count = t.else_count + excluded.else_count",
            [
                campaign.get_db_prep_value(campaign_id, connection),
                key,
                counter_shard(),
                then,
                else_,
            ],
        )


def branch_stats_read(*, campaign_id: UUID, keys: list[str]) -> list[dict]:
    """`[{key, waiting, then_count, else_count}]` for the branches `keys` of a campaign:
    the decisions as counted (a few rows), the waiting ones counted from the waiting
    index (enrollment_waiting_idx: only the enrollments waiting now have an entry)."""
    if not keys:
        return []
    decided: dict[str, tuple[int, int]] = {
        key: (then_sum or 0, else_sum or 0)
        for key, then_sum, else_sum in BranchStats.objects.filter(
            campaign_id=campaign_id, key__in=keys
        )
        .values("key")
        .annotate(then_sum=Sum("then_count"), else_sum=Sum("else_count"))
        .order_by()
        .values_list("key", "then_sum", "else_sum")
    }
    waiting = dict(
        Enrollment.objects.filter(waiting_at(), campaign_id=campaign_id, current_key__in=keys)
        .order_by()
        .values("current_key")
        .annotate(n=Count("id"))
        .values_list("current_key", "n")
    )
    return [
        {
            "key": key,
            "waiting": waiting.get(key, 0),
            "then_count": decided.get(key, (0, 0))[0],
            "else_count": decided.get(key, (0, 0))[1],
        }
        for key in keys
    ]


def deadline_text(enrollment: Enrollment) -> str | None:
    """The deadline of a waiting enrollment, as the API writes times."""
    return utc_timestamp(enrollment.branch_deadline)
