"""What a send would do, read through the API before anything is sent.

Every time and every refusal is the service's own: POST /campaigns/:id/dispatch/preview
(the dispatch's planner: each contact's first send time, by the campaign's delay and
send window, and the error the dispatch would answer instead) and GET
/campaigns/:id/sending_status (why each mailbox waits, in the scheduler's words). This
module only gathers them; it restates no rule of the service.
"""

from datetime import UTC, datetime
from typing import Any

from outreach_sdk import Client, models


def _parse(value: Any) -> datetime | None:
    if isinstance(value, str):
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    return value if isinstance(value, datetime) else None


def _iso(value: datetime | None) -> str | None:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z") if value else None


def _planned(preview: models.DispatchPreview, status: models.SendingStatus) -> dict[str, Any]:
    """The service's answer on when and whether it would send."""
    return {
        "first_send_at": _iso(preview.first_send_at),
        "send_times": preview.send_times,
        "refusal": preview.refusal,
        "mailboxes_now": status.summary,
        "first_send_note": "A first send time is when step 1 is due; each mailbox then sends at its "
        "pace and daily limit (mailboxes_now says what holds each one now).",
    }


SIMULATOR = "simulator"


def simulator_note(mailboxes: list[models.Mailbox]) -> dict[str, Any]:
    """What a preview says of simulator mailboxes (auth_method `simulator`): their
    addresses, and whether nothing at all would leave the service."""
    simulators = [m.from_email for m in mailboxes if m.auth_method == SIMULATOR]
    nothing_leaves = bool(mailboxes) and len(simulators) == len(mailboxes)
    answer: dict[str, Any] = {"simulator_mailboxes": simulators, "nothing_leaves": nothing_leaves}
    if nothing_leaves:
        answer["note"] = (
            f"Every mailbox of this campaign is a simulator ({', '.join(simulators)}): no "
            "email leaves the service and nothing counts in the plan's usage; each contact's "
            "outcome is the one its simulator.test address asks for (ada+reply@simulator.test)."
        )
    elif simulators:
        answer["note"] = (
            f"Simulator mailboxes ({', '.join(simulators)}) send nothing out; the others "
            "send real email."
        )
    return answer


def dispatch_preview(
    client: Client, campaign: models.Campaign, contact_ids: list[str] | None
) -> dict[str, Any]:
    """The contacts a dispatch would reach (its pending enrollments, all or the named
    contacts'), the mailboxes it would send from at which pace, when each contact's
    first email is due and what would refuse it (the service's dispatch preview), what
    holds each mailbox now (sending_status), and the sends the plan has left this
    period. `contact_ids` of the answer is the exact set a confirmation binds."""
    wanted = None if contact_ids is None else set(contact_ids)
    pending = [
        enrollment
        for enrollment in client.campaigns.enrollments(campaign.id, status="pending", limit=1000)
        if wanted is None or enrollment.contact_id in wanted
    ]
    reached = {e.contact_id for e in pending}
    mailboxes = [client.mailboxes.retrieve(mailbox_id) for mailbox_id in campaign.credential_ids]
    planned = client.campaigns.dispatch_preview(
        campaign.id, contact_ids=contact_ids, all_pending=contact_ids is None
    )
    status = client.campaigns.sending_status(campaign.id)
    usage = client.billing.usage()
    answer = {
        "campaign_id": campaign.id,
        "campaign_name": campaign.name,
        "contacts": len(pending),
        "contact_ids": sorted(reached),
        "sample_contacts": [e.contact_email for e in pending[:5]],
        "not_pending": sorted(wanted - reached) if wanted is not None else [],
        "steps": len(campaign.steps),
        "mailboxes": [
            {
                "id": m.id,
                "from_email": m.from_email,
                "enabled": m.disabled_at is None,
                "daily_limit": m.daily_limit,
                "pace_seconds": [m.min_interval_seconds, m.max_interval_seconds],
                "simulator": m.auth_method == SIMULATOR,
            }
            for m in mailboxes
        ],
        **simulator_note(mailboxes),
        **_planned(planned, status),
        "contacts_first_send_at": {
            c["contact_id"]: _iso(_parse(c["first_send_at"])) for c in planned.contacts
        },
        "blocked_contacts": planned.blocked,
        "plan_remaining_sends": usage.remaining_sends,
        "monthly_limit": usage.monthly_limit,
    }
    return answer


def outreach_preview(
    client: Client, campaign: models.Campaign, contact: dict[str, Any]
) -> dict[str, Any]:
    """What start_outreach would send: to whom, from which mailboxes, and when (the
    service's dispatch preview)."""
    mailboxes = [client.mailboxes.retrieve(mailbox_id) for mailbox_id in campaign.credential_ids]
    # The dispatch's preview of no pending contact: its refusal, and the first send time
    # of a contact in the campaign's time zone (a new contact has none of its own).
    planned = client.campaigns.dispatch_preview(campaign.id, contact_ids=[])
    status = client.campaigns.sending_status(campaign.id)
    usage = client.billing.usage()
    return {
        "campaign_id": campaign.id,
        "campaign_name": campaign.name,
        "contact": contact,
        "steps": len(campaign.steps),
        "first_subject": campaign.steps[0].get("subject") if campaign.steps else None,
        "mailboxes": [
            {
                "id": m.id,
                "from_email": m.from_email,
                "enabled": m.disabled_at is None,
                "simulator": m.auth_method == SIMULATOR,
            }
            for m in mailboxes
        ],
        **simulator_note(mailboxes),
        **_planned(planned, status),
        "first_send_at": _iso(planned.campaign_timezone_first_send_at),
        "plan_remaining_sends": usage.remaining_sends,
    }
