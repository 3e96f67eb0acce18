"""Replies and responses as the intake and the sending of responses leave them, made
directly for the tests of what reads them (the API's clients and the admin)."""

from django.utils import timezone

from outreach.models.conversations import Reply, ReplyResponse


def reply_for(enrollment, **overrides) -> Reply:
    """A reply as the intake keeps it, to the enrollment's last message."""
    sent = enrollment.messages.order_by("-step").first()
    values = {
        "account": enrollment.campaign.account,
        "enrollment": enrollment,
        "campaign": enrollment.campaign,
        "contact": enrollment.contact,
        "credential_id": enrollment.credential_id,
        "message_id": f"r{Reply.objects.count()}@client.example",
        "in_reply_to": sent.message_id,
        "references": [sent.message_id],
        "from_email": enrollment.contact.email,
        "from_name": "Ada Lovelace",
        "to": [sent.credential.from_email],
        "subject": "Re: Hello",
        "received_at": timezone.now(),
        "text": "Sounds good.\n\nOn Mon, Ada wrote:\n> Hello",
        "new_text": "Sounds good.",
        "html": "<p>Sounds good.</p>",
    }
    values.update(overrides)
    return Reply.objects.create(**values)


def response_to(reply: Reply, **overrides) -> ReplyResponse:
    """A response sent to the reply, from the mailbox that received it."""
    values = {
        "account": reply.account,
        "reply": reply,
        "enrollment": reply.enrollment,
        "contact": reply.contact,
        "credential_id": reply.credential_id,
        "message_id": f"a{ReplyResponse.objects.count()}@sender.example",
        "to_email": reply.from_email,
        "subject": "Re: Hello",
        "body_text": "Great, Tuesday?",
        "status": "sent",
        "sent_at": timezone.now(),
    }
    values.update(overrides)
    return ReplyResponse.objects.create(**values)
