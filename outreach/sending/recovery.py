"""Scheduler recovery: claims of dead workers, due enrollments of suppressed contacts."""

from collections import defaultdict
from datetime import datetime

from django.db import transaction
from django.db.models import Q

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


def suppressed_end(*, now: datetime) -> int:
    """Due enrollments of contacts suppressed since they were scheduled (an unsubscribe or
    a bounce elsewhere) end without a send: unsubscribed or bounced, like their contact.
    The events for those changes were emitted where the suppression happened. A campaign
    left without an active enrollment is completed."""
    # Not those in flight: their sender checks the contact right before sending, and
    # gives the claim back (then they end here, on a later run).
    due = Enrollment.objects.not_in_flight().filter(
        status__in=Enrollment.DUE_STATUSES, next_send_at__lte=now
    )
    suppressed = Q(contact__unsubscribed_at__isnull=False) | Q(contact__bounced_at__isnull=False)
    # One read per tick; the common case (nothing suppressed) stops here.
    campaign_ids = set(due.filter(suppressed).values_list("campaign_id", flat=True).distinct())
    if not campaign_ids:
        return 0
    with transaction.atomic():
        ended = enrollments_suppressed_end(due, bounce_reason=SUPPRESSED_BOUNCE_REASON, now=now)
        campaigns_complete_if_done(campaign_ids=campaign_ids, at=now)
    return ended
