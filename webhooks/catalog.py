"""The event catalog: every event type the service emits, what it means, and the JSON
Schema (draft 2020-12) of its `data` (GET /webhook_event_types, docs/webhooks.md).

The schemas are the contract receivers code against. The test suite holds the
service to them: every event a test makes the service emit is validated against its
type's schema (tests/support/event_schemas.py), so a payload cannot drift from its
description unnoticed. `example_data` is the `data` of a test delivery
(POST /webhooks/:id/test), valid against the same schema.
"""

# Long: one table of every event type with its schema and example, read as a whole.

from typing import Any

from webhooks.approval_events import approval_event_types
from webhooks.catalog_bounces import BOUNCE_EXAMPLE, BOUNCE_PROPERTIES
from webhooks.models import (
    CAMPAIGN_PAUSED,
    CREDENTIAL_DISABLED,
    CREDENTIAL_THROTTLED,
    ENROLLMENT_BOUNCED,
    ENROLLMENT_BRANCHED,
    ENROLLMENT_CLICKED,
    ENROLLMENT_OPENED,
    ENROLLMENT_REPLIED,
    ENROLLMENT_SENT,
    ENROLLMENT_UNSUBSCRIBED,
    EVENT_TYPES,
    OPT_IN_EVENT_TYPES,
    REPLY_LABELLED,
    REPLY_RECEIVED,
)

__all__ = ["EVENT_CATALOG", "EventType", "example_data"]

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"

_UUID = {"type": "string", "format": "uuid"}
_TIMESTAMP = {"type": "string", "format": "date-time", "description": "ISO 8601 UTC, `Z`."}
_NULLABLE_TIMESTAMP = {"type": ["string", "null"], "format": "date-time"}
# Enrollment statuses (docs/outreach.md, "Enrollment").
_ENROLLMENT_STATUSES = [
    "pending",
    "scheduled",
    "sent",
    "completed",
    "replied",
    "bounced",
    "unsubscribed",
    "failed",
    "stopped",
]


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "$schema": SCHEMA_DIALECT,
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


_ENROLLMENT_BASE = {
    "enrollment_id": _UUID,
    "contact_id": _UUID,
    "contact_email": {"type": "string", "format": "email"},
    "campaign_id": _UUID,
}
_ENROLLMENT_STATE = _object(
    {
        **_ENROLLMENT_BASE,
        "status": {
            "type": "string",
            "enum": _ENROLLMENT_STATUSES,
            "description": "The enrollment's status after the event.",
        },
        "sent_at": {**_NULLABLE_TIMESTAMP, "description": "When its last step was sent."},
        "replied_at": {**_NULLABLE_TIMESTAMP, "description": "Null until replied."},
        "bounce_reason": {"type": ["string", "null"], "description": "Null unless bounced."},
    }
)


class EventType:
    def __init__(
        self,
        name: str,
        description: str,
        schema: dict[str, Any],
        example: dict,
        *,
        opt_in: bool = False,
    ):
        self.name = name
        self.description = description
        self.schema = schema
        self.example = example
        # Delivered only to webhooks whose event_filters name it (`*` does not cover it).
        self.opt_in = opt_in

    def as_json(self) -> dict[str, Any]:
        return {
            "type": self.name,
            "description": self.description,
            "opt_in": self.opt_in,
            "schema": self.schema,
        }


_IDS = {
    "enrollment_id": "00000000-0000-4000-8000-000000000001",
    "contact_id": "00000000-0000-4000-8000-000000000002",
    "contact_email": "ada@example.org",
    "campaign_id": "00000000-0000-4000-8000-000000000003",
}
_WHEN = "2026-01-15T09:30:00.000000Z"


def _enrollment_example(status: str, **changes: Any) -> dict:
    return {
        **_IDS,
        "status": status,
        "sent_at": _WHEN,
        "replied_at": None,
        "bounce_reason": None,
        **changes,
    }


_NULLABLE_UUID = {"type": ["string", "null"], "format": "uuid"}
_NULLABLE_STRING = {"type": ["string", "null"]}
_STRINGS = {"type": "array", "items": {"type": "string"}}
_REPLY_ID = "00000000-0000-4000-8000-000000000005"
# Reply labels (docs/conversations.md, "Labels").
_REPLY_LABELS = [
    "interested",
    "not_interested",
    "not_now",
    "meeting_booked",
    "wrong_person",
    "out_of_office",
    "auto_reply",
    "unsubscribe_request",
    "other",
]
# A reply's fields as GET /replies/:id shows them, without text, new_text and html.
_REPLY_SCHEMA = _object(
    {
        "id": _UUID,
        "enrollment_id": _UUID,
        "campaign_id": _UUID,
        "contact_id": _UUID,
        "credential_id": _NULLABLE_UUID,
        "from_email": {"type": "string"},
        "from_name": {"type": "string"},
        "to": _STRINGS,
        "cc": _STRINGS,
        "subject": {"type": "string"},
        "received_at": _TIMESTAMP,
        "message_id": {"type": "string"},
        "in_reply_to": _NULLABLE_STRING,
        "truncated": {"type": "boolean"},
        "attachments": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "filename": {"type": "string"},
                    "content_type": {"type": "string"},
                    "size": {"type": "integer"},
                },
                "required": ["filename", "content_type", "size"],
                "additionalProperties": False,
            },
        },
        "label": {"type": ["string", "null"], "enum": [*_REPLY_LABELS, None]},
        "label_source": {"type": ["string", "null"], "enum": ["auto", "manual", None]},
        "sender_verified": {"type": "boolean"},
        "returns_on": {"type": ["string", "null"], "format": "date"},
        "read": {"type": "boolean"},
        "rule_outcomes": {
            "type": "array",
            "description": "What the campaign's on_reply rules did for this reply.",
            "items": {
                "type": "object",
                "properties": {
                    "label": {"type": "string", "enum": _REPLY_LABELS},
                    "campaign_id": _UUID,
                    "outcome": {
                        "type": "string",
                        "enum": [
                            "enrolled",
                            "already_enrolled",
                            "pending_over_cap",
                            "pending_draft",
                            "pending_not_sendable",
                            "suppressed",
                            "blocked",
                        ],
                    },
                },
                "required": ["label", "campaign_id", "outcome"],
                "additionalProperties": False,
            },
        },
        "body_purged_at": _NULLABLE_TIMESTAMP,
        "created_at": _TIMESTAMP,
    }
)
_REPLY_EXAMPLE = {
    "id": _REPLY_ID,
    "enrollment_id": _IDS["enrollment_id"],
    "campaign_id": _IDS["campaign_id"],
    "contact_id": _IDS["contact_id"],
    "credential_id": "00000000-0000-4000-8000-000000000004",
    "from_email": "ada@example.org",
    "from_name": "Ada",
    "to": ["sender@example.com"],
    "cc": [],
    "subject": "Re: Spring",
    "received_at": _WHEN,
    "message_id": "CAF1234@mail.example.org",
    "in_reply_to": "0001.a@sender.example.com",
    "truncated": False,
    "attachments": [],
    "label": "not_now",
    "label_source": "auto",
    "sender_verified": True,
    "returns_on": None,
    "read": False,
    "rule_outcomes": [
        {
            "label": "not_now",
            "campaign_id": "00000000-0000-4000-8000-000000000006",
            "outcome": "enrolled",
        }
    ],
    "body_purged_at": None,
    "created_at": _WHEN,
}

EVENT_CATALOG: dict[str, EventType] = {
    item.name: item
    for item in (
        EventType(
            ENROLLMENT_SENT,
            "A step was accepted by the SMTP server. One event per step sent.",
            _ENROLLMENT_STATE,
            _enrollment_example("sent"),
        ),
        EventType(
            ENROLLMENT_OPENED,
            "The open pixel of the enrollment was first loaded. Repeat opens do not fire.",
            _ENROLLMENT_STATE,
            _enrollment_example("sent"),
        ),
        EventType(
            ENROLLMENT_REPLIED,
            "A reply from the contact was matched to the enrollment (auto-replies excluded).",
            _object(
                {
                    **_ENROLLMENT_STATE["properties"],
                    "reply_id": {
                        **_NULLABLE_UUID,
                        "description": "The kept reply (GET /replies/:id); null when none "
                        "was kept.",
                    },
                }
            ),
            _enrollment_example("replied", replied_at=_WHEN, reply_id=_REPLY_ID),
        ),
        EventType(
            ENROLLMENT_BOUNCED,
            "A permanent SMTP error, a relay provider bounce, or a bounce report in the mailbox.",
            _object({**_ENROLLMENT_STATE["properties"], **BOUNCE_PROPERTIES}),
            _enrollment_example("bounced", **BOUNCE_EXAMPLE),
        ),
        EventType(
            ENROLLMENT_UNSUBSCRIBED,
            "The contact unsubscribed (link, one-click, or a spam complaint). One event per "
            "active enrollment of the contact.",
            _object({**_ENROLLMENT_BASE, "unsubscribed_at": _TIMESTAMP}),
            {**_IDS, "unsubscribed_at": _WHEN},
        ),
        EventType(
            ENROLLMENT_CLICKED,
            "A tracked link of the enrollment's email was first followed (campaigns with "
            "track_clicks). Opt-in: delivered only to webhooks whose event_filters name it.",
            _object(
                {
                    **_ENROLLMENT_STATE["properties"],
                    "url": {"type": "string", "description": "The link's own URL."},
                    "clicked_at": _TIMESTAMP,
                }
            ),
            {
                **_enrollment_example("sent"),
                "url": "https://example.com/pricing",
                "clicked_at": _WHEN,
            },
            opt_in=True,
        ),
        EventType(
            ENROLLMENT_BRANCHED,
            "An enrollment waiting at a branch of its sequence was decided: the open or "
            "click the branch waits for came (`then`), or its deadline passed without it "
            "(`else`). One event per decision; a live edit of the steps emits none. "
            "Opt-in: delivered only to webhooks whose event_filters name it.",
            _object(
                {
                    **_ENROLLMENT_BASE,
                    "branch_key": {"type": "string", "description": "The branch's key."},
                    "outcome": {"type": "string", "enum": ["then", "else"]},
                    "next_key": {
                        "type": "string",
                        "description": 'The key of the element it goes to, or "end".',
                    },
                }
            ),
            {**_IDS, "branch_key": "opened_intro", "outcome": "then", "next_key": "case_study"},
            opt_in=True,
        ),
        EventType(
            REPLY_RECEIVED,
            "An inbound message was matched to an enrollment and kept: a reply, an "
            "auto-reply or an out-of-office notice (GET /replies/:id has its text). "
            "Opt-in: delivered only to webhooks whose event_filters name it.",
            _REPLY_SCHEMA,
            _REPLY_EXAMPLE,
            opt_in=True,
        ),
        EventType(
            REPLY_LABELLED,
            "A label was set on a reply, by the intake's rules (`auto`) or through the API "
            "(`manual`). Opt-in: delivered only to webhooks whose event_filters name it.",
            _object(
                {
                    "reply_id": _UUID,
                    "enrollment_id": _UUID,
                    "label": {"type": "string", "enum": _REPLY_LABELS},
                    "label_source": {"type": "string", "enum": ["auto", "manual"]},
                }
            ),
            {
                "reply_id": _REPLY_ID,
                "enrollment_id": _IDS["enrollment_id"],
                "label": "interested",
                "label_source": "manual",
            },
            opt_in=True,
        ),
        EventType(
            CREDENTIAL_DISABLED,
            "A mailbox was disabled because its bounce rate in a campaign exceeded the "
            "campaign's threshold.",
            _object(
                {
                    "credential_id": _UUID,
                    "from_email": {"type": "string", "format": "email"},
                    "campaign_id": _UUID,
                    "bounce_rate": {"type": "number", "description": "Percent."},
                    "threshold": {"type": "number", "description": "Percent."},
                }
            ),
            {
                "credential_id": "00000000-0000-4000-8000-000000000004",
                "from_email": "sender@example.com",
                "campaign_id": _IDS["campaign_id"],
                "bounce_rate": 7.5,
                "threshold": 5.0,
            },
        ),
        EventType(
            CREDENTIAL_THROTTLED,
            "A mailbox stopped sending to protect its reputation: toward one recipient "
            "provider until `until` (the circuit breaker: `blocks` or `rate_limited`), or "
            "altogether until resumed with PATCH {paused_at: null} (`complaint_rate`; "
            "`provider` and `until` null). Opt-in: delivered only to webhooks whose "
            "event_filters name it (docs/deliverability.md).",
            _object(
                {
                    "credential_id": _UUID,
                    "from_email": {"type": "string", "format": "email"},
                    "provider": {
                        "type": ["string", "null"],
                        "enum": ["google", "microsoft", "yahoo", "apple", "other", None],
                    },
                    "reason": {
                        "type": "string",
                        "enum": ["blocks", "rate_limited", "complaint_rate"],
                    },
                    "until": _NULLABLE_TIMESTAMP,
                    "detail": {"type": "string", "description": "The server's words."},
                }
            ),
            {
                "credential_id": "00000000-0000-4000-8000-000000000004",
                "from_email": "sender@example.com",
                "provider": "google",
                "reason": "blocks",
                "until": "2026-03-02T11:00:00.000000Z",
                "detail": "550 5.7.26 This mail has been blocked because the sender is "
                "unauthenticated.",
            },
            opt_in=True,
        ),
        EventType(
            CAMPAIGN_PAUSED,
            "A campaign was paused by the service because all its mailboxes are disabled.",
            _object(
                {
                    "campaign_id": _UUID,
                    "name": {"type": "string"},
                    "reason": {"type": "string", "enum": ["all_credentials_disabled"]},
                }
            ),
            {
                "campaign_id": _IDS["campaign_id"],
                "name": "Spring",
                "reason": "all_credentials_disabled",
            },
        ),
        *approval_event_types(EventType),
    )
}
# The catalog describes every type of the list, and no other.
assert set(EVENT_CATALOG) == set(EVENT_TYPES + OPT_IN_EVENT_TYPES), (
    "webhooks.catalog is out of step with EVENT_TYPES and OPT_IN_EVENT_TYPES"
)
assert {n for n, item in EVENT_CATALOG.items() if item.opt_in} == set(OPT_IN_EVENT_TYPES)


def example_data(event_type: str) -> dict:
    """A copy of the type's example `data` (KeyError for an unknown type)."""
    return dict(EVENT_CATALOG[event_type].example)
