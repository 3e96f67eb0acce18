"""Factories of conversations: a reply the intake matched to an enrollment whose step was
sent, on top of the outreach factories."""

from datetime import UTC, datetime

import factory

from outreach.models.conversations import Reply
from outreach.models.sending import Enrollment, Message
from tests.outreach.factories import EnrollmentFactory


class SentMessageFactory(factory.django.DjangoModelFactory):
    """Step 1 as sent to the enrollment's contact from its mailbox."""

    class Meta:
        model = Message

    enrollment = factory.SubFactory(EnrollmentFactory, status=Enrollment.Status.SENT)
    account = factory.SelfAttribute("enrollment.campaign.account")
    credential = factory.LazyAttribute(lambda o: o.enrollment.campaign.credentials.first())
    step = 1
    message_id = factory.Sequence(lambda n: f"step{n}@sender.example.com")
    to_email = factory.SelfAttribute("enrollment.contact.email")
    subject = "Hello Ada 1"
    text = "Step 1 for Acme"
    sent_at = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)


class ReplyFactory(factory.django.DjangoModelFactory):
    """The contact's answer to a sent step, received in the step's mailbox: pass
    `message=` (a sent Message) or let one be made."""

    class Meta:
        model = Reply

    class Params:
        message = factory.SubFactory(SentMessageFactory)

    enrollment = factory.SelfAttribute("message.enrollment")
    account = factory.SelfAttribute("enrollment.campaign.account")
    campaign = factory.SelfAttribute("enrollment.campaign")
    contact = factory.SelfAttribute("enrollment.contact")
    credential = factory.SelfAttribute("message.credential")
    message_id = factory.Sequence(lambda n: f"reply{n}@mail.example.org")
    in_reply_to = factory.SelfAttribute("message.message_id")
    references = factory.LazyAttribute(lambda o: [o.message.message_id])
    from_email = factory.SelfAttribute("enrollment.contact.email")
    from_name = "Ada Lovelace"
    to = factory.LazyAttribute(lambda o: [o.message.credential.from_email])
    subject = factory.LazyAttribute(lambda o: f"Re: {o.message.subject}")
    received_at = datetime(2026, 3, 2, 11, 0, tzinfo=UTC)
    text = "Sounds good, tell me more.\n\nOn Mon, you wrote:\n> Step 1 for Acme"
    new_text = "Sounds good, tell me more."
