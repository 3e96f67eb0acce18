"""Scheduler recovery: claims of dead workers, due enrollments of suppressed contacts."""

from collections import defaultdict
from datetime import datetime, timedelta

from django.db import connection, transaction
from django.utils import timezone

from outreach.campaigns.state import campaigns_complete_if_done
from outreach.domain_cap.counts import counts_release
from outreach.enrollments import enrollments_suppressed_end
from outreach.mailboxes.pace import reservation_release, utc_day
from outreach.models.sending import Enrollment, SendClaim
from outreach.sending.record import claims_interrupted_record

SUPPRESSED_BOUNCE_REASON = "The address bounced earlier; the contact is suppressed."


# --- 1. claims of dead workers -----------------------------------------------------------


def claims_recover(*, now: datetime) -> int:
    """Open claims whose lease lapsed. Never started: deleted, the reservation given back;
    the enrollment was never written by its claim (its next_send_at is still the time
    its step was due), so without the claim it is due again at once, in its place.
    Started (`sending_at` set): the worker died during the SMTP transaction or before
    recording its outcome; the message is recorded as sent with its reply unseen
    (outreach.sending.record.claims_interrupted_record), never sent a second time. A
    started claim whose mailbox was deleted meanwhile cannot be recorded as that
    mailbox's send: it is deleted like a never-started one."""
    recovered = 0
    with transaction.atomic():
        stale = list(
            SendClaim.objects.open()
            .select_for_update(skip_locked=True)
            .filter(lease_until__lte=now)
            .order_by("lease_until")[:1000]
        )
        if not stale:
            return 0
        # (credential, UTC day of the claim) -> when those never-started claims were made
        unsent: dict[tuple, list[datetime]] = defaultdict(list)
        interrupted, dropped = [], []
        for claim in stale:
            if claim.sending_at is not None and claim.credential_id is not None:
                interrupted.append(claim)
                continue
            dropped.append(claim)
            if claim.credential_id is not None:
                unsent[claim.credential_id, utc_day(claim.claimed_at)].append(claim.claimed_at)
        SendClaim.objects.filter(pk__in=[c.pk for c in dropped]).delete()
        for (credential_id, _day), claimed_at in unsent.items():
            # A reservation belongs to the day of its claim: once the counter has moved
            # on to a new day, reservation_release leaves the new day's count alone.
            reservation_release(
                credential_id=credential_id, at=claimed_at[0], count=len(claimed_at)
            )
        # The recipient domain units too, each to the day it was taken on.
        counts_release(c.domain_count_id for c in dropped)
        if interrupted:
            claims_interrupted_record(claims=interrupted, now=now)
            campaign_ids = set(
                Enrollment.objects.filter(
                    pk__in=[c.enrollment_id for c in interrupted]
                ).values_list("campaign_id", flat=True)
            )
            campaigns_complete_if_done(campaign_ids=campaign_ids, at=now)
        recovered = len(stale)
    return recovered


# --- 2. suppressed contacts -----------------------------------------------------------------

# How far before the last look's start each look reads: a suppression's transaction may
# commit after a look that started later than its write (a row written at T, committed at
# T + 5 s, is not seen by a look that starts at T + 1 s: the next look reads from T + 1 s
# less this). It covers the longest transaction that suppresses a contact, or enrolls or
# schedules one it read unsuppressed (each a request or one report's work: seconds),
# and the clock difference between the hosts. Its cost: the suppressed contacts written
# in the last five minutes are looked at again at every run.
SUPPRESSED_LOOK_MARGIN = timedelta(minutes=5)
SUPPRESSED_SWEEP = "suppressed_end"
# The mark moves once it is this far behind a look's start, not at every run: a run that
# finds nothing new writes nothing (no transaction id, no commit to flush each second;
# an upsert would lock the row even where it does not move it), and the window reaches
# this much further back at most.
SUPPRESSED_MARK_STEP = timedelta(minutes=1)

# One statement, autocommit: the contacts looked at (the suppressed ones written since the
# last look, by contact_suppressed_written_idx, and the watched ones), their active
# enrollments (enrollment_unique leads with the contact), which of those are due and not
# in flight (sendclaim_open_unique); the watch kept to those with an active enrollment
# left, the mark moved to this look's start (or made, at the first look). Its result:
# the due ones to end.
_LOOK_SQL = """
WITH mark AS (
    SELECT COALESCE(
        (SELECT at FROM outreach_sweepmark WHERE name = %(sweep)s), '-infinity'
    ) AS at
),
looked AS (
    SELECT c.id AS contact_id FROM outreach_contact c
    WHERE (c.unsubscribed_at IS NOT NULL OR c.bounced_at IS NOT NULL)
      AND c.updated_at >= (SELECT at FROM mark) - make_interval(secs => %(margin)s)
    UNION
    SELECT contact_id FROM outreach_suppressedwatch
),
active AS (
    SELECT e.* FROM looked CROSS JOIN LATERAL (
        SELECT e.contact_id, e.campaign_id,
               e.status = ANY(%(due_statuses)s) AND e.next_send_at <= %(now)s
               AND NOT EXISTS (
                   SELECT 1 FROM outreach_sendclaim s
                   WHERE s.enrollment_id = e.id AND s.finished_at IS NULL
               ) AS due
        FROM outreach_enrollment e
        WHERE e.contact_id = looked.contact_id AND e.status = ANY(%(active_statuses)s)
        -- A fence (the subquery is not merged into the join): the enrollments are read
        -- per contact looked at, never by a scan of them all.
        OFFSET 0
    ) e
),
watched AS (
    INSERT INTO outreach_suppressedwatch (contact_id, since)
    SELECT DISTINCT contact_id, %(seen)s::timestamptz FROM active
    ON CONFLICT (contact_id) DO NOTHING
),
forgotten AS (
    DELETE FROM outreach_suppressedwatch w
    WHERE NOT EXISTS (SELECT 1 FROM active WHERE active.contact_id = w.contact_id)
),
moved AS (
    UPDATE outreach_sweepmark SET at = %(seen)s
    WHERE name = %(sweep)s AND at < %(seen)s::timestamptz - make_interval(secs => %(step)s)
),
first AS (
    INSERT INTO outreach_sweepmark (name, at)
    SELECT %(sweep)s, %(seen)s WHERE NOT EXISTS (SELECT 1 FROM mark WHERE at > '-infinity')
    ON CONFLICT (name) DO NOTHING
)
SELECT DISTINCT campaign_id, contact_id FROM active WHERE due
"""


def suppressed_end(*, now: datetime) -> int:
    """Due enrollments of contacts suppressed since they were scheduled (an unsubscribe or
    a bounce elsewhere) end without a send: unsubscribed or bounced, like their contact.
    The events for those changes were emitted where the suppression happened. A campaign
    left without an active enrollment is completed.

    What it reads is what was suppressed since its last look, never the due backlog
    (docs/sending.md, "Suppressed contacts"): the suppressed contacts whose row was
    written since that look's start less SUPPRESSED_LOOK_MARGIN (the write's wall clock,
    updated_at: the suppression's own time is the event's, which can be months old when
    a new address brings its suppression with it), and the contacts it watches. A look
    keeps watching each contact looked at that still has an active enrollment it cannot
    end now (not due yet, in flight, pending): so a contact suppressed while its
    enrollment was claimed ends once the claim is given back, and one whose next step is
    days ahead ends when it is due, whatever the window by then. A persisted high-water
    mark (SweepMark), not only an overlap: a scheduler stopped for an hour misses
    nothing; the margin covers the transactions that commit after a later look started.
    No mark (the first run): every suppressed contact is looked at once."""
    seen = timezone.now()  # the wall clock, as updated_at; `now` may be a test's
    with connection.cursor() as cursor:
        cursor.execute(
            _LOOK_SQL,
            {
                "sweep": SUPPRESSED_SWEEP,
                "margin": SUPPRESSED_LOOK_MARGIN.total_seconds(),
                "seen": seen,
                "step": SUPPRESSED_MARK_STEP.total_seconds(),
                "now": now,
                "due_statuses": list(Enrollment.DUE_STATUSES),
                "active_statuses": list(Enrollment.ACTIVE_STATUSES),
            },
        )
        found = cursor.fetchall()
    # One statement per run; the common case (nothing suppressed) stops here.
    if not found:
        return 0
    # Not those in flight: their sender checks the contact right before sending, and
    # gives the claim back (then they end here, on a later run: their contact is watched).
    due = Enrollment.objects.not_in_flight().filter(
        status__in=Enrollment.DUE_STATUSES,
        next_send_at__lte=now,
        contact_id__in={contact_id for _, contact_id in found},
    )
    with transaction.atomic():
        ended = enrollments_suppressed_end(due, bounce_reason=SUPPRESSED_BOUNCE_REASON, now=now)
        campaigns_complete_if_done(campaign_ids={c for c, _ in found}, at=now)
    return ended
