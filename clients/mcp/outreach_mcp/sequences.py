"""Sequences that react, for an agent: a campaign's graph in words, and an edit of its
steps previewed before it is made.

An edit of a running sequence can move people: those waiting at an element the edit
removes go on to a kept element, or end (POST /campaigns/:id/steps/preview says who and
where). Such an edit is confirmed as a dispatch is (confirmation.py): the first call
answers the preview and a token bound to the campaign, the exact steps and the exact
moves; the edit is made only when called again with that token. An edit that moves no
one is made at once. If the moves changed since the preview (people moved on meanwhile),
the token no longer matches and a new preview comes back.
"""

from typing import Any

from outreach_sdk import Client
from outreach_sdk.sequences import describe

from outreach_mcp.confirmation import Binding, Confirmations, confirmation_gate

EDIT_MESSAGE = (
    "Nothing was changed: this edit moves people who are on their way through the "
    "sequence (moves). Show the preview to the user; call again with the same arguments "
    "and this confirmation_token only once they agree."
)


def sequence_words(client: Client, campaign_id: str) -> dict[str, Any]:
    """The campaign's steps, one sentence per element, and the steps themselves."""
    campaign = client.campaigns.retrieve(campaign_id)
    return {
        "campaign_id": campaign.id,
        "name": campaign.name,
        "status": campaign.status,
        "sequence_in_words": describe(campaign.steps),
        "steps": campaign.steps,
    }


def _move_words(move: dict[str, Any]) -> str:
    count = move["enrollments"]
    people = f"{count} enrollment{'s' if count != 1 else ''} at {move['from_key']}"
    if move["to_key"] == "end":
        return f"{people} would leave the sequence (completed)."
    if move["to_key"] == move["from_key"]:
        return f"{people} would start again at the new {move['to_key']}."
    return f"{people} would go to {move['to_key']}."


def steps_edit_gate(
    client: Client,
    confirmations: Confirmations,
    *,
    campaign_id: str,
    steps: list[dict[str, Any]],
    token: str | None,
) -> dict[str, Any] | None:
    """None when the edit may be made now (it moves no one, or `token` confirms exactly
    these steps and moves); otherwise the answer to return: the preview and a token."""
    preview = client.campaigns.steps_preview(campaign_id, steps)
    if token is not None:
        confirmations.check(token)  # forged, expired or spent: an error
    if not preview.moves:
        return None
    binding = Binding(
        action="update_campaign_steps",
        target=campaign_id,
        ids=[f"{m['from_key']}>{m['to_key']}:{m['enrollments']}" for m in preview.moves],
        extra={"steps": steps},
    )
    shown = {
        "moves": preview.moves,
        "moves_in_words": [_move_words(move) for move in preview.moves],
    }
    return confirmation_gate(
        confirmations, binding, token=token, preview=shown, message=EDIT_MESSAGE
    )
