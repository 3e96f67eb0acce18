"""The approval events of the catalog (webhooks.catalog): approval.requested and
approval.decided, whose `data` is the approval as GET /approvals/:id shows it
(docs/agents.md)."""

from typing import Any

from webhooks.models import APPROVAL_DECIDED, APPROVAL_REQUESTED

_UUID = {"type": "string", "format": "uuid"}
_NULLABLE_UUID = {"type": ["string", "null"], "format": "uuid"}
_TIMESTAMP = {"type": "string", "format": "date-time", "description": "ISO 8601 UTC, `Z`."}
_KEY_REF = {
    "type": "object",
    "properties": {"api_key_id": _UUID, "prefix": {"type": "string"}},
    "required": ["api_key_id", "prefix"],
    "additionalProperties": False,
}
_PROPERTIES: dict[str, Any] = {
    "id": _UUID,
    "action": {"type": "string", "enum": ["dispatch", "outreach", "respond"]},
    "campaign_id": _NULLABLE_UUID,
    "contact_ids": {"type": ["array", "null"], "items": _UUID},
    "contact": {"type": ["object", "null"], "description": "outreach: the contact given."},
    "reply_id": _NULLABLE_UUID,
    "body_text": {"type": "string"},
    "body_html": {"type": "string"},
    "requested_by": _KEY_REF,
    "decided_by": {"anyOf": [_KEY_REF, {"type": "null"}]},
    "status": {"type": "string", "enum": ["pending", "approved", "rejected", "expired", "failed"]},
    "reason": {"type": "string"},
    "outcome": {"type": ["object", "null"]},
    "created_at": _TIMESTAMP,
    "decided_at": {"type": ["string", "null"], "format": "date-time"},
    "expires_at": _TIMESTAMP,
}
APPROVAL_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": _PROPERTIES,
    "required": list(_PROPERTIES),
    "additionalProperties": False,
}
_KEY = {"api_key_id": "00000000-0000-4000-8000-000000000007", "prefix": "ak_live_Ab3d"}
APPROVAL_EXAMPLE = {
    "id": "00000000-0000-4000-8000-000000000006",
    "action": "dispatch",
    "campaign_id": "00000000-0000-4000-8000-000000000003",
    "contact_ids": None,
    "contact": None,
    "reply_id": None,
    "body_text": "",
    "body_html": "",
    "requested_by": _KEY,
    "decided_by": None,
    "status": "pending",
    "reason": "",
    "outcome": None,
    "created_at": "2026-01-15T09:30:00.000000Z",
    "decided_at": None,
    "expires_at": "2026-01-18T09:30:00.000000Z",
}
_OPT_IN = "Opt-in: delivered only to webhooks whose event_filters name it."


def approval_event_types(event_type: type) -> tuple:
    """The two approval event types, as `event_type` (webhooks.catalog.EventType)."""
    return (
        event_type(
            APPROVAL_REQUESTED,
            "A drafter key asked to send (dispatch, outreach or respond) and the send is held "
            "as an approval until an admin or sender key decides. `data`: the approval. " + _OPT_IN,
            APPROVAL_SCHEMA,
            APPROVAL_EXAMPLE,
            opt_in=True,
        ),
        event_type(
            APPROVAL_DECIDED,
            "An approval left `pending`: approved (it ran; `outcome` says what it did), "
            "rejected, failed (what refused it is in `outcome`) or expired. `data`: the "
            "approval. " + _OPT_IN,
            APPROVAL_SCHEMA,
            {
                **APPROVAL_EXAMPLE,
                "status": "approved",
                "decided_by": {**_KEY, "api_key_id": "00000000-0000-4000-8000-000000000008"},
                "decided_at": "2026-01-15T10:02:00.000000Z",
                "outcome": {"dispatched": 12},
            },
            opt_in=True,
        ),
    )
