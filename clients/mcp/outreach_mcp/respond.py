"""Responding to a reply: the preview a person confirms before `respond_to_reply` sends
(the confirmation itself is the gate every sending tool goes through: confirmation.py;
its binding is the reply, its contact and the exact body, text and HTML)."""

from typing import Any

from outreach_sdk import Client, models

QUOTED_LINES = 5


def _subject(subject: str) -> str:
    """The response's subject as the service makes it: one line, `Re: <subject>` without
    stacking the "Re:" prefixes it has already (any case, with or without the space)."""
    subject = " ".join(subject.split())
    while subject[:3].lower() == "re:":
        subject = subject[3:].lstrip(" ")
    return f"Re: {subject}"


def response_preview(
    client: Client, reply: models.Reply, body_text: str, body_html: str | None
) -> dict[str, Any]:
    """What a response would send, read through the API: to whom, the subject, the first
    lines of the message it answers, the mailbox it goes from, the exact body, the
    answers sent to this reply already, and what would make the service refuse it."""
    warnings = []
    mailbox = None
    if reply.credential_id is None:
        warnings.append("The mailbox that received this reply was deleted: it cannot be answered.")
    else:
        found = client.mailboxes.retrieve(reply.credential_id)
        mailbox = {
            "id": found.id,
            "from_email": found.from_email,
            "from_name": found.from_name,
            "enabled": found.disabled_at is None,
            "oauth_status": found.oauth_status,
        }
        if found.disabled_at is not None:
            warnings.append(f"The mailbox {found.from_email} is disabled: it cannot send.")
        if found.oauth_status == "reauthorization_required":
            warnings.append(f"The mailbox {found.from_email} needs re-authorization first.")
    contact = client.contacts.retrieve(reply.contact_id)
    if contact.unsubscribed_at or contact.bounced_at:
        why = "unsubscribed" if contact.unsubscribed_at else "bounced"
        warnings.append(f"The contact {why}: no email may be sent to them.")
    earlier = [
        {"id": entry.response.id, "status": entry.response.status, "at": entry.raw["at"]}
        for entry in client.campaigns.thread(reply.campaign_id, reply.enrollment_id)
        if entry.response is not None and entry.response.reply_id == reply.id
    ]
    answered = (reply.new_text or reply.text).strip().splitlines()
    return {
        "reply_id": reply.id,
        "to": reply.from_email,
        "to_name": reply.from_name,
        "subject": _subject(reply.subject),
        "from_mailbox": mailbox,
        "in_reply_to": {
            "received_at": reply.raw.get("received_at"),
            "first_lines": [f"> {line}" for line in answered[:QUOTED_LINES]],
            "more_lines": max(0, len(answered) - QUOTED_LINES),
        },
        "body_text": body_text,
        "body_html": body_html,
        "earlier_responses": earlier,
        "warnings": warnings,
    }
