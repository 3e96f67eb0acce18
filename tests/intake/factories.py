"""Sent enrollments as the sending engine leaves them: a Message row per step with
its Message-ID, the enrollment `sent` on its thread's mailbox."""

import uuid
from datetime import timedelta

from django.utils import timezone

from outreach.models.sending import Enrollment, Message
from tests.outreach.factories import CampaignFactory, ContactFactory, EnrollmentFactory


def message_id_new(domain: str = "sender.example") -> str:
    return f"{uuid.uuid4().hex}@{domain}"


def sent_enrollment(
    *, campaign=None, contact=None, account=None, steps_sent: int = 1, **campaign_kwargs
):
    """An enrollment with `steps_sent` messages sent from the campaign's credential
    (the first an hour ago), status `sent`, the next step due tomorrow."""
    if campaign is None:
        kwargs = {"with_steps": max(steps_sent + 1, 2), **campaign_kwargs}
        if account is not None:
            kwargs["account"] = account
        campaign = CampaignFactory(status="active", **kwargs)
    credential = campaign.credentials.first()
    contact = contact or ContactFactory(account=campaign.account)
    now = timezone.now()
    enrollment = EnrollmentFactory(
        campaign=campaign,
        contact=contact,
        status=Enrollment.Status.SENT,
        current_step=steps_sent,
        credential=credential,
        dispatched_at=now - timedelta(hours=2),
        sent_at=now - timedelta(hours=1),
        next_send_at=now + timedelta(days=1),
    )
    for step in range(1, steps_sent + 1):
        Message.objects.create(
            account=campaign.account,
            enrollment=enrollment,
            credential=credential,
            step=step,
            message_id=message_id_new(),
            to_email=contact.email,
            subject="Hello",
            sent_at=now - timedelta(hours=1, minutes=-step),
        )
    return enrollment


def first_message(enrollment) -> Message:
    return enrollment.messages.order_by("step").first()
