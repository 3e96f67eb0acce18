"""Every change of an enrollment's status, and each one's count in its campaign's stats.

Each function is one transition: a conditional UPDATE (the status it leaves re-checked
on the row, so a transition that lost a race changes nothing and counts nothing), and
the stats it moves (outreach.enrollments.stats), in the caller's transaction. What
follows from the change (webhook events, suppression, a campaign completed by its last
active enrollment, the mailbox's counters) stays with the caller, which knows why it
happened. The map of the statuses is in this package's docstring.
"""

from collections import Counter
from collections.abc import Iterable
from datetime import datetime
from uuid import UUID

from django.db import connection, transaction
from django.db.models import OuterRef, QuerySet, Subquery

from outreach.analytics import Hit, bounce_counter, hits_add
from outreach.enrollments.branching import held
from outreach.enrollments.stats import (
    answer_count,
    count,
    counting,
)
from outreach.models.contacts import Contact
from outreach.models.sending import Enrollment

Status = Enrollment.Status
# An ended enrollment is nowhere in its sequence any more (API.md 17: current_key null).
_ENDED = {"current_key": None, "branch_deadline": None, "held_until": None}


def _ended(**columns) -> dict:
    """The columns of an enrollment that ends: `columns`, no next send, no place."""
    return {**columns, "next_send_at": None, **_ENDED}


# ---------------------------------------------------------------- enrolled: pending


def enroll(*, campaign_id, contact_ids: Iterable[UUID]) -> int:
    """Enroll contacts as pending; a contact already in the campaign is left as it is.
    Returns how many were enrolled. Callers pass only non-suppressed contacts."""
    rows = [
        Enrollment(campaign_id=campaign_id, contact_id=contact_id) for contact_id in contact_ids
    ]
    if not rows:
        return 0
    with transaction.atomic():
        # The foreign keys checked (and their contacts and campaign key-share locked)
        # now, not at commit: after this transaction's stats write, that lock could
        # wait on a contact whose unsubscribe waits on these stats.
        with connection.cursor() as cursor:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        Enrollment.objects.bulk_create(rows, ignore_conflicts=True, batch_size=2000)
        # The ids are made here, so the rows that exist under them are the ones this call
        # inserted (a conflict keeps the other row, with its own id).
        created = Enrollment.objects.filter(pk__in=[row.pk for row in rows]).count()
        count(campaign_id, enrolled=created)
    return created


def enrollment_enroll(*, campaign_id, contact_id) -> tuple[Enrollment, bool]:
    """One contact's enrollment, made if it did not exist: (enrollment, created)."""
    with transaction.atomic():
        enrollment, created = Enrollment.objects.get_or_create(
            campaign_id=campaign_id, contact_id=contact_id
        )
        if created:
            count(campaign_id, enrolled=1)
    return enrollment, created


# ---------------------------------------------------------------- dispatched: scheduled


def _scheduled(next_send_at: datetime, now: datetime, current_key: str | None) -> dict:
    changes = {
        "status": Status.SCHEDULED,
        "next_send_at": next_send_at,
        "dispatched_at": now,
        "updated_at": now,
    }
    if current_key is not None:
        changes["current_key"] = current_key
    return changes


def enrollments_schedule(
    rows: QuerySet, *, next_send_at: datetime, now: datetime, current_key: str | None = None
) -> int:
    """Pending enrollments among `rows` are scheduled, their first step (`current_key`,
    the campaign's first element) due at `next_send_at` (dispatch). Returns how many."""
    return rows.filter(status=Status.PENDING).update(**_scheduled(next_send_at, now, current_key))


def enrollment_schedule(
    enrollment: Enrollment, *, next_send_at: datetime, now: datetime, current_key: str | None = None
) -> bool:
    """`enrollments_schedule` for one enrollment, kept up to date in memory too."""
    changes = _scheduled(next_send_at, now, current_key)
    rows = Enrollment.objects.filter(pk=enrollment.pk)
    if not enrollments_schedule(rows, next_send_at=next_send_at, now=now, current_key=current_key):
        return False
    for name, value in changes.items():
        setattr(enrollment, name, value)
    return True


# ---------------------------------------------------------------- a step sent: sent, completed


def after_step(*, next_send_at: datetime | None, now: datetime) -> dict:
    """The status columns of an enrollment whose step was just sent: `sent`, due again
    at `next_send_at`, or `completed` when no step follows (`next_send_at` None)."""
    if next_send_at is not None:
        return {"status": Status.SENT, "next_send_at": next_send_at, "completed_at": None}
    return {"status": Status.COMPLETED, "next_send_at": None, "completed_at": now}


# A step sent, as a CTE of the one statement that records a sent message
# (outreach.sending.record_sql): a still-due enrollment moves on (`moves`), its values from
# `after_step` (or a graph move, outreach.enrollments.branching.Move.columns): one more
# email step sent, `step` the position of the last, `path` (JSON: the step's key and the
# branches the move decided) appended to its path, `note` its last_error (why a reply
# went unseen). Intake may have ended it since the claim (a reply, an unsubscribe): then
# nothing moves. The statement counts a first step as sent when it moved.
SENT_MOVE_CTE = """
moved AS (
    UPDATE outreach_enrollment SET status = %(status)s, current_step = current_step + 1,
        last_step = %(step)s, current_key = %(current_key)s,
        path = path || %(path)s::jsonb, branch_deadline = %(branch_deadline)s,
        held_until = NULL,
        sent_at = %(now)s, next_send_at = %(next_send_at)s, completed_at = %(completed_at)s,
        credential_id = %(credential)s, send_attempts = 0, last_error = %(note)s,
        updated_at = %(now)s
    WHERE id = %(enrollment)s AND status = ANY(%(due)s) AND %(moves)s
    RETURNING 1
),"""


def enrollments_complete(*, enrollment_ids: Iterable[UUID], now: datetime) -> int:
    """Due enrollments with no step left to send (their campaign lost its later steps)
    are completed. Returns how many."""
    return enrollments_complete_rows(
        Enrollment.objects.filter(pk__in=list(enrollment_ids)), now=now
    )


def enrollments_complete_rows(rows: QuerySet, *, now: datetime) -> int:
    """`enrollments_complete` for the due enrollments among `rows` (one UPDATE however
    many: a live edit that ends the sequence where they wait). Ended, they are at no
    element. Returns how many."""
    return rows.filter(status__in=Enrollment.DUE_STATUSES).update(
        status=Status.COMPLETED, completed_at=now, next_send_at=None, updated_at=now, **_ENDED
    )


# ---------------------------------------------------------------- no send possible: failed


def enrollments_fail(rows: QuerySet, *, error: str, now: datetime | None, **columns) -> int:
    """Due enrollments among `rows` end `failed` with `error` (no retry can help, or
    the retries ran out; `columns`: more to write, e.g. send_attempts). Returns how many."""
    changes = _ended(status=Status.FAILED, last_error=error, **columns)
    if now is not None:
        changes["updated_at"] = now
    return rows.filter(status__in=Enrollment.DUE_STATUSES).update(**changes)


# ---------------------------------------------------------------- the contact answers


def enrollment_bounce(
    *,
    enrollment_id,
    reason: str,
    at: datetime,
    bounce_type: str | None = None,
    bounce_category: str | None = None,
) -> Enrollment | None:
    """The enrollment's message bounced: `bounced`, once, with what it answered counted
    and what the bounce meant (outreach.bounce_types). Returns the enrollment (with its
    contact and campaign) when this call bounced it, None when it was bounced already.
    Lock its contact first (the lock order)."""
    won = Enrollment.objects.filter(pk=enrollment_id, bounced_at__isnull=True).update(
        **_ended(
            status=Status.BOUNCED,
            bounced_at=at,
            bounce_reason=reason,
            bounce_type=bounce_type,
            bounce_category=bounce_category,
            updated_at=at,
        )
    )
    if not won:
        return None
    enrollment = Enrollment.objects.select_related("contact", "campaign").get(pk=enrollment_id)
    answer_count(enrollment, "bounced")
    hits_add([Hit(bounce_counter(bounce_type, reason), enrollment_id, at)])
    return enrollment


# Statuses a reply moves to `replied` when the campaign stops on reply; `completed`
# moves there whatever the setting (there is no sequence left to continue).
REPLY_STOPS = (Status.SCHEDULED, Status.SENT, Status.COMPLETED)


def enrollment_reply(enrollment: Enrollment, *, at: datetime) -> bool:
    """The contact replied (`enrollment` locked, its campaign loaded, not replied yet):
    replied_at is recorded and counted; the status becomes `replied` when the campaign
    stops on reply (or it was completed). Returns whether it stopped there."""
    enrollment.replied_at = at
    fields = ["replied_at", "updated_at"]
    stops = enrollment.status == Status.COMPLETED or (
        enrollment.campaign.stop_on_reply and enrollment.status in REPLY_STOPS
    )
    if stops:
        enrollment.status = Status.REPLIED
        enrollment.next_send_at = None
        fields += ["status", "next_send_at", *_ENDED]
        for name, value in _ENDED.items():
            setattr(enrollment, name, value)
    enrollment.save(update_fields=fields)
    answer_count(enrollment, "replied")
    hits_add([Hit("replied", enrollment.pk, at)])
    return stops


def enrollment_postpone(*, enrollment_id, until: datetime, now: datetime) -> bool:
    """Hold a due enrollment's next step until `until` (an out-of-office notice's return):
    its next_send_at is raised, never lowered; the status does not change. One waiting
    at a branch has no next send yet: its held_until is raised instead, and the step the
    branch leads to is not due before it (outreach.enrollments.branching). Returns
    whether it moved. A step already claimed by a sending task goes out as claimed."""
    postponed = Enrollment.objects.filter(
        pk=enrollment_id,
        status__in=Enrollment.DUE_STATUSES,
        next_send_at__lt=until,
    ).update(next_send_at=until, updated_at=now)
    return bool(postponed) or held(enrollment_id=enrollment_id, until=until, now=now)


def enrollments_unsubscribe(enrollments: list[Enrollment], *, at: datetime) -> None:
    """The contact unsubscribed: its active enrollments (locked, as read) end
    `unsubscribed`, each counted in its campaign."""
    Enrollment.objects.filter(pk__in=[e.pk for e in enrollments]).update(
        status=Status.UNSUBSCRIBED, unsubscribed_at=at, next_send_at=None, updated_at=at, **_ENDED
    )
    for enrollment in enrollments:
        enrollment.status = Status.UNSUBSCRIBED
        enrollment.unsubscribed_at = at
        enrollment.next_send_at = None
        count(enrollment.campaign_id, unsubscribed=1)
    hits_add([Hit("unsubscribed", enrollment.pk, at) for enrollment in enrollments])


def enrollments_suppressed_end(rows: QuerySet, *, bounce_reason: str, now: datetime) -> int:
    """Enrollments among `rows` whose contact was suppressed since they were scheduled
    end like their contact, `unsubscribed` or `bounced` (at the contact's time), each
    counted in its campaign. Returns how many."""
    total = 0
    contact = Contact.objects.filter(pk=OuterRef("contact_id"))
    endings: tuple[tuple[str, str, dict[str, str]], ...] = (
        ("unsubscribed", Status.UNSUBSCRIBED, {}),
        ("bounced", Status.BOUNCED, {"bounce_reason": bounce_reason}),
    )
    with transaction.atomic(), counting():
        for name, status, columns in endings:
            # Locked as matched, then changed by id: the counts are the rows changed.
            ended = list(
                rows.filter(**{f"contact__{name}_at__isnull": False})
                .select_for_update(of=("self",), no_key=True)
                .order_by("pk")
                .values_list("pk", "campaign_id", f"contact__{name}_at")
            )
            if not ended:
                continue
            Enrollment.objects.filter(pk__in=[pk for pk, _, _ in ended]).update(
                status=status,
                next_send_at=None,
                updated_at=now,
                **_ENDED,
                **{f"{name}_at": Subquery(contact.values(f"{name}_at")[:1])},
                **columns,
            )
            for campaign_id, ended_here in Counter(c for _, c, _ in ended).items():
                count(campaign_id, **{name: ended_here})
            if name == "unsubscribed":  # a bounce elsewhere is not a bounce of this one
                hits_add([Hit(name, pk, at) for pk, _, at in ended])
            total += len(ended)
    return total


# ---------------------------------------------------------------- ended by a rule or by hand


def enrollments_stop(rows: QuerySet, *, campaign_id, reason: str, at: datetime) -> int:
    """Active enrollments among `rows` (of one campaign) end `stopped` for `reason`,
    counted. Returns how many."""
    stopped = rows.filter(status__in=Enrollment.ACTIVE_STATUSES).update(
        **_ended(status=Status.STOPPED, stop_reason=reason, stopped_at=at, updated_at=at)
    )
    if stopped:
        count(campaign_id, stopped=stopped)
    return stopped
