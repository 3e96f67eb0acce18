"""Responding to a reply: the preview a person confirms before `respond_to_reply` sends
(the confirmation itself is the gate every sending tool goes through: confirmation.py;
its binding is the reply, its contact and the exact body, text and HTML)."""

from typing import Any

from outreach_sdk import Client, models

QUOTED_LINES = 5


def response_preview(
    client: Client, reply: models.Reply, body_text: str, body_html: str | None
) -> dict[str, Any]:
    """What a response would send, read through the API: to whom, the subject and
    headers as the service makes them and what would make it refuse (POST
    /replies/:id/respond/preview), the first lines of the message it answers, the
    mailbox it goes from, the exact body, and the answers sent to this reply already."""
    server = client.replies.respond_preview(reply.id, body_text, body_html)
    mailbox = None
    if reply.credential_id is not None:
        found = client.mailboxes.retrieve(reply.credential_id)
        mailbox = {
            "id": found.id,
            "from_email": found.from_email,
            "from_name": found.from_name,
            "enabled": found.disabled_at is None,
            "oauth_status": found.oauth_status,
        }
    # The service's refusal, in its words (a deleted or disabled mailbox, one to connect
    # again, a contact who unsubscribed or bounced, a blocked address).
    refusal = server.refusal
    warnings = [] if refusal is None else [f"{refusal['message']} ({refusal['code']})"]
    earlier = [
        {"id": entry.response.id, "status": entry.response.status, "at": entry.raw["at"]}
        for entry in client.campaigns.thread(reply.campaign_id, reply.enrollment_id)
        if entry.response is not None and entry.response.reply_id == reply.id
    ]
    answered = (reply.new_text or reply.text).strip().splitlines()
    return {
        "reply_id": reply.id,
        "to": server.to,
        "to_name": reply.from_name,
        "subject": server.subject,
        "headers": server.headers,
        "refusal": server.refusal,
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
