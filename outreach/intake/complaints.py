"""A spam complaint about one of our messages, from wherever it came: a relay
provider's complaint event (outreach.intake.relay) or a feedback report in a mailbox
(outreach.intake.feedback, applied by outreach.intake.inbound).

    complaint_apply(contact_id=..., message=..., mailbox_id=...)

In one transaction: the contact is unsubscribed with the reason `complained`
(contact_unsubscribe: suppressed, its active enrollments moved, an
enrollment.unsubscribed each); the complaint is counted in the hour's analytics and
against the mailbox that sent the message (the complaint guard,
outreach.sending.complaints) once per contact: when this complaint unsubscribed it or
moved an enrollment. A second report of the same complaint (a provider's retry, the
loop's report after the relay's event) changes nothing. A complaint about the last step
of a finished sequence still counts: the contact was not unsubscribed before it.
"""

from django.db import transaction
from django.utils import timezone

from outreach.analytics import Hit, hits_add
from outreach.intake.services import contact_unsubscribe
from outreach.models.contacts import Contact, Suppression
from outreach.models.sending import Enrollment, Message
from outreach.sending.complaints import complaint_record


def complaint_apply(
    *, contact_id, message: Message | None, mailbox_id, opt_out: bool = False
) -> int:
    """The module docstring's transaction; returns how many enrollments it moved, or -1
    when the complaint was already known (nothing counted). `opt_out`: the report asks
    only for removal (a feedback loop's `opt-out`): unsubscribed with the reason
    `unsubscribed`, not counted as a complaint."""
    reason = Suppression.Reason.UNSUBSCRIBED if opt_out else Suppression.Reason.COMPLAINED
    with transaction.atomic():
        before = (
            Contact.objects.select_for_update(no_key=True)
            .filter(pk=contact_id)
            .values_list("unsubscribed_at")
            .first()
        )
        if before is None:  # deleted meanwhile: nobody to unsubscribe
            return -1
        moved = contact_unsubscribe(contact_id=contact_id, reason=reason)
        if not moved and before[0] is not None:
            return -1
        if opt_out:
            return len(moved)
        _complaint_count(contact_id=contact_id, message=message)
        sender = message.credential_id if message is not None else None
        complaint_record(credential_id=sender or mailbox_id, at=timezone.now())
    return len(moved)


def _complaint_count(*, contact_id, message: Message | None) -> None:
    """The complaint in the hour's analytics (docs/analytics.md): for the message it
    names, or else the contact's latest enrollment (its last message)."""
    if message is not None:
        hit = Hit("complaints", message.enrollment_id, timezone.now(), message_id=message.pk)
    else:
        enrollment_id = (
            Enrollment.objects.filter(contact_id=contact_id)
            .order_by("-created_at")
            .values_list("pk", flat=True)
            .first()
        )
        if enrollment_id is None:
            return
        hit = Hit("complaints", enrollment_id, timezone.now())
    hits_add([hit])
