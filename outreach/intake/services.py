"""One service per intake signal. Each owns its state rules and emits its events in
the transaction that changes the state (docs/webhooks.md), so a crash loses neither.

Bounces (SMTP, relay provider, delivery status reports) all go through
`outreach.sending.bounces.enrollment_mark_bounced`, the sending engine's single bounce rule.
"""

import logging
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from outreach.campaigns.branch_moves import branch_event
from outreach.campaigns.state import campaigns_complete_if_done
from outreach.campaigns.stopping import domain_reply_lock, enrollments_stop_same_domain
from outreach.contacts.suppression import suppression_record
from outreach.enrollments import (
    counting,
    enrollment_reply,
    enrollments_unsubscribe,
)
from outreach.enrollments.opens import enrollment_message_open
from outreach.events import (
    ENROLLMENT_UNSUBSCRIBED,
    enrollment_emit,
    enrollment_replied_emit,
)
from outreach.models.contacts import Contact, Suppression
from outreach.models.sending import Enrollment

logger = logging.getLogger(__name__)


def enrollment_mark_opened(
    *, enrollment_id, at: datetime | None = None, step: int | None = None
) -> bool:
    """Record the first open of an enrollment and fire enrollment.opened; and the first
    open of its message (the step at position `step`, or its last message for a pixel
    that names none), which moves an enrollment waiting at a branch on opens of it
    (outreach.campaigns.branch_moves).

    The pixel calls this on every load, so a repeat open is a single read that writes
    nothing (outreach.enrollments.opens) and an UPDATE of the message that matches
    nothing. Returns whether this call was the enrollment's first open.
    """
    at = at or timezone.now()
    first, message = enrollment_message_open(enrollment_id=enrollment_id, at=at, step=step)
    if message.step_key is not None and message.waiting_key is not None:
        # The message's first open, the enrollment waiting at a branch: decided now if
        # the open meets it, in a transaction of its own right after the open's
        # statement. (Were this process lost between the two, the branch's deadline
        # finds the open recorded and decides `then`.)
        branch_event(
            enrollment_id=enrollment_id,
            branch_key=message.waiting_key,
            kind="opened",
            step_key=message.step_key,
            at=at,
        )
    return first


def enrollment_mark_replied(
    *, enrollment_id, at: datetime | None = None, reply_id=None
) -> Enrollment | None:
    """Record the contact's reply and fire enrollment.replied, once per enrollment
    (`reply_id` in its data: the kept reply, or null).

    - stop_on_reply (default): status `replied`, next_send_at cleared: no further step.
    - stop_on_reply false: replied_at is recorded and the event fires, but the status
      stays (`sent`) and the next step still goes out; a `completed` one becomes `replied`.
    - bounced, unsubscribed, failed, stopped, pending enrollments keep their status
      (they are already stopped); the reply is still recorded and announced.
    - stop_on_domain_reply: the campaign's other active enrollments at the replier's
      email domain end `stopped` (outreach.campaigns.stopping), whatever the replier's status.

    Returns the enrollment when this call recorded the reply, None if it was known.
    """
    at = at or timezone.now()
    with transaction.atomic(), counting():
        colleagues = domain_reply_lock(enrollment_id=enrollment_id)
        enrollment = (
            Enrollment.objects.select_for_update(of=("self",), no_key=True)
            .select_related("campaign", "contact")
            .filter(pk=enrollment_id)
            .first()
        )
        if enrollment is None or enrollment.replied_at is not None:
            return None
        was_active = enrollment.status in Enrollment.ACTIVE_STATUSES
        stops = enrollment_reply(enrollment, at=at)
        enrollment_replied_emit(enrollment=enrollment, reply_id=reply_id)
        # Colleagues at the replier's company (stop_on_domain_reply), in this transaction.
        enrollments_stop_same_domain(enrollment=enrollment, locked=colleagues, at=at)
        if stops and was_active:
            # It may have been the campaign's last active enrollment.
            campaigns_complete_if_done(campaign_ids=[enrollment.campaign_id], at=at)
    return enrollment


def contact_unsubscribe(
    *,
    contact_id,
    at: datetime | None = None,
    reason: str = Suppression.Reason.UNSUBSCRIBED,
) -> list[Enrollment]:
    """Unsubscribe a contact: suppress it (never sent to again, its address recorded on
    the account's suppression list with `reason`: `unsubscribed`, or `complained` for a
    spam complaint) and move each of its active enrollments, in every campaign of the
    account, to `unsubscribed`, with one enrollment.unsubscribed each.

    Idempotent: an already unsubscribed contact with no active enrollment changes
    nothing and fires nothing. Returns the enrollments this call moved.
    """
    at = at or timezone.now()
    with transaction.atomic(), counting():
        # Not a key change: a concurrent insert referencing the contact need not wait.
        contact = Contact.objects.select_for_update(no_key=True).filter(pk=contact_id).first()
        if contact is None:
            return []
        if contact.unsubscribed_at is None:
            # updated_at: the write's wall clock (`at` may be a reply's, hours old), which
            # the scheduler's sweep of suppressed contacts reads.
            Contact.objects.filter(pk=contact.pk).update(
                unsubscribed_at=at, updated_at=timezone.now()
            )
        suppression_record(
            account_id=contact.account_id, email=contact.email_lower, reason=reason, at=at
        )
        # Locked, so a concurrent unsubscribe (a double click, a complaint arriving
        # with the click) cannot announce the same enrollment twice.
        moved = list(
            Enrollment.objects.select_for_update(of=("self",), no_key=True)
            .select_related("campaign")
            .filter(contact_id=contact.pk, status__in=Enrollment.ACTIVE_STATUSES)
            .order_by("created_at")
        )
        if not moved:
            return []
        enrollments_unsubscribe(moved, at=at)
        for enrollment in moved:
            enrollment.contact = contact
            enrollment_emit(enrollment=enrollment, event_type=ENROLLMENT_UNSUBSCRIBED)
        campaigns_complete_if_done(campaign_ids={e.campaign_id for e in moved}, at=at)
    logger.info("contact %s unsubscribed: %d enrollment(s) stopped", contact_id, len(moved))
    return moved
