"""The data of the outreach events (docs/webhooks.md), built in one place.

Every producer (the sending engine, the bounce service, intake) emits through these,
inside the transaction of the state change, so the payloads cannot drift apart.
Timestamps are ISO 8601 UTC strings with microseconds and `Z`, as the API shows them.
"""

from collections.abc import Callable
from datetime import datetime

from config.timestamps import utc_timestamp
from webhooks.events import event_emit
from webhooks.models import (  # the one list of event types
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
    REPLY_LABELLED,
    REPLY_RECEIVED,
    Webhook,
)

_ENROLLMENT_STATE_EVENTS = (
    ENROLLMENT_SENT,
    ENROLLMENT_OPENED,
    ENROLLMENT_REPLIED,
    ENROLLMENT_BOUNCED,
)


def enrollment_event_data(enrollment, *, event_type: str) -> dict:
    """`data` of an enrollment.* event, from the enrollment's state after the change.

    `enrollment.contact` must be loaded (or loadable); its email is in the payload.
    """
    base = {
        "enrollment_id": str(enrollment.pk),
        "contact_id": str(enrollment.contact_id),
        "contact_email": enrollment.contact.email,
        "campaign_id": str(enrollment.campaign_id),
    }
    if event_type == ENROLLMENT_UNSUBSCRIBED:
        return {**base, "unsubscribed_at": utc_timestamp(enrollment.unsubscribed_at)}
    if event_type not in _ENROLLMENT_STATE_EVENTS:
        raise ValueError(f"not an enrollment event: {event_type!r}")
    data = {
        **base,
        "status": enrollment.status,
        "sent_at": utc_timestamp(enrollment.sent_at),
        "replied_at": utc_timestamp(enrollment.replied_at),
        "bounce_reason": enrollment.bounce_reason or None,
    }
    if event_type == ENROLLMENT_BOUNCED:
        # What the bounce meant (outreach.bounce_types; docs/sending.md, "Bounce types").
        data["bounce_type"] = enrollment.bounce_type or None
        data["bounce_category"] = enrollment.bounce_category or None
    return data


def enrollment_emit(*, enrollment, event_type: str):
    """Emit an enrollment.* event for `enrollment` (account from its campaign)."""
    account_id = enrollment.campaign.account_id
    return event_emit(
        account_id, event_type, enrollment_event_data(enrollment, event_type=event_type)
    )


def enrollment_replied_emit(*, enrollment, reply_id):
    """enrollment.replied: the enrollment's state, plus `reply_id`, the kept reply that
    made it (null when none was kept)."""
    data = {
        **enrollment_event_data(enrollment, event_type=ENROLLMENT_REPLIED),
        "reply_id": None if reply_id is None else str(reply_id),
    }
    return event_emit(enrollment.campaign.account_id, ENROLLMENT_REPLIED, data)


def _wanted(account_id, event_type: str) -> bool:
    """Whether an enabled webhook of the account names the (opt-in) type: reply events
    are written only then, so an inbound message of an account that asked for none
    adds no event (one look at the account's enabled webhooks, webhook_enabled_idx)."""
    return Webhook.objects.filter(
        account_id=account_id, disabled_at__isnull=True, event_filters__contains=[event_type]
    ).exists()


def approval_emit(*, account_id, event_type: str, data: Callable[[], dict]):
    """approval.requested / approval.decided (opt-in): `data()`, the approval's API
    JSON, built only when a webhook wants it."""
    if _wanted(account_id, event_type):
        event_emit(account_id, event_type, data())


def reply_received_emit(*, account_id, data: dict):
    """reply.received (opt-in): `data`, the reply's API fields without its bodies
    (outreach.conversations.rules.reply_event_data)."""
    if _wanted(account_id, REPLY_RECEIVED):
        event_emit(account_id, REPLY_RECEIVED, data)


def reply_labelled_emit(*, reply):
    """reply.labelled (opt-in): a label was set on the reply, by the intake or the API."""
    if _wanted(reply.account_id, REPLY_LABELLED):
        event_emit(
            reply.account_id,
            REPLY_LABELLED,
            {
                "reply_id": str(reply.pk),
                "enrollment_id": str(reply.enrollment_id),
                "label": reply.label,
                "label_source": reply.label_source,
            },
        )


def enrollment_clicked_emit(*, enrollment, url: str):
    """enrollment.clicked: the data of enrollment.opened, plus the link's `url` and
    `clicked_at` (the first click's time)."""
    data = {
        **enrollment_event_data(enrollment, event_type=ENROLLMENT_OPENED),
        "url": url,
        "clicked_at": utc_timestamp(enrollment.clicked_at),
    }
    return event_emit(enrollment.campaign.account_id, ENROLLMENT_CLICKED, data)


def enrollment_branched_emit(*, enrollment, branch_key: str, outcome: str, next_key: str):
    """enrollment.branched (opt-in): a branch of the enrollment's sequence decided,
    `then` or `else`, and the key it led to ("end": none)."""
    data = {
        "enrollment_id": str(enrollment.pk),
        "campaign_id": str(enrollment.campaign_id),
        "contact_id": str(enrollment.contact_id),
        "contact_email": enrollment.contact.email,
        "branch_key": branch_key,
        "outcome": outcome,
        "next_key": next_key,
    }
    return event_emit(enrollment.campaign.account_id, ENROLLMENT_BRANCHED, data)


def credential_disabled_emit(*, credential, campaign, bounce_rate: float, threshold: float):
    return event_emit(
        credential.account_id,
        CREDENTIAL_DISABLED,
        {
            "credential_id": str(credential.pk),
            "from_email": credential.from_email,
            "campaign_id": str(campaign.pk),
            "bounce_rate": round(float(bounce_rate), 2),
            "threshold": float(threshold),
        },
    )


def campaign_paused_emit(*, campaign, reason: str):
    return event_emit(
        campaign.account_id,
        CAMPAIGN_PAUSED,
        {"campaign_id": str(campaign.pk), "name": campaign.name, "reason": reason},
    )


def credential_throttled_emit(
    *, credential, provider: str | None, reason: str, until: datetime | None, detail: str
):
    """credential.throttled (opt-in): the mailbox stopped sending toward `provider` until
    `until` (the circuit breaker), or altogether until resumed (provider and until null:
    the complaint guard). Written only when a webhook of the account asks for it."""
    if not _wanted(credential.account_id, CREDENTIAL_THROTTLED):
        return None
    return event_emit(
        credential.account_id,
        CREDENTIAL_THROTTLED,
        {
            "credential_id": str(credential.pk),
            "from_email": credential.from_email,
            "provider": provider,
            "reason": reason,
            "until": utc_timestamp(until),
            "detail": detail,
        },
    )
