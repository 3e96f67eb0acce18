"""Enrollments moved by a live edit of their campaign's steps (API.md 17): an enrollment
waiting at an element the edit removes goes on to a kept element (outreach.campaigns.
edits decides which). Each move is one UPDATE of every enrollment at one key, in the
edit's transaction; it emits no event. An edit that ends the sequence where they wait
completes them through `enrollments_complete_rows` (transitions).

Enrollments in flight (an open send claim) are moved like the others; what becomes of
their claims is outreach.campaigns.edits's (docs/outreach.md, "Live edits").
"""

from datetime import datetime

from django.db.models import F, QuerySet, Value
from django.db.models.functions import Coalesce, Greatest

from outreach.models.sending import Enrollment

Status = Enrollment.Status


def enrollments_move_to_step(rows: QuerySet, *, key: str, send_at: datetime, now: datetime) -> int:
    """Due enrollments among `rows` wait for the email step `key` next, due at `send_at`
    (its delay counted from the edit, in the send window) or, for one held by an
    out-of-office return met at a removed branch, at that return if later. Their status
    stays (scheduled: nothing sent yet; sent). Returns how many."""
    return rows.filter(status__in=Enrollment.DUE_STATUSES).update(
        current_key=key,
        next_send_at=Greatest(Value(send_at), Coalesce(F("held_until"), Value(send_at))),
        branch_deadline=None,
        held_until=None,
        updated_at=now,
    )


def enrollments_wait_at_branch(
    rows: QuerySet, *, key: str, deadline: datetime, now: datetime
) -> int:
    """Due enrollments among `rows` wait at the branch `key` until `deadline` (the
    branch's within_minutes from the edit): status `sent`, nothing due (next_send_at
    null), found again by the branch deadline's index. An open or click recorded
    before they arrived is not looked at here: the engine's arrival at a branch is
    what decides on one at once. Returns how many."""
    return rows.filter(status__in=Enrollment.DUE_STATUSES).update(
        status=Status.SENT,
        current_key=key,
        next_send_at=None,
        branch_deadline=deadline,
        updated_at=now,
    )
