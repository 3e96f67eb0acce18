"""What a send would do, read through the API before anything is sent.

The first send time comes from the service's own planner: GET
/campaigns/:id/sending_status, the scheduler's dry run, says per mailbox when it may
send next (its pace, its daily limit, the campaign's state) and why not now. The
preview takes the earliest mailbox that may send, moves that to step 1's delay and the
send window's next opening, and spreads the contacts over the mailboxes at their pace.
"""

from datetime import UTC, datetime, time, timedelta
from math import ceil
from typing import Any
from zoneinfo import ZoneInfo

from outreach_sdk import Client, models

# Reasons a mailbox gives no send at all for this campaign, whatever the time.
BLOCKING = {"mailbox_disabled", "reauthorization_required", "campaign_paused"}
# Reasons that lift at a known time (`until`).
WAITING = {"paced", "daily_limit_reached"}


def _iso(value: datetime | None) -> str | None:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z") if value else None


def _parse(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if isinstance(value, str):
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    return None


def first_send_at(
    now: datetime, *, delay_minutes: int, timezone: str, send_window: dict | None
) -> datetime:
    """When step 1 is first due: `delay_minutes` after now, moved to the campaign's next
    send-window opening when the window is closed then (local hours on ISO weekdays)."""
    due = now + timedelta(minutes=delay_minutes)
    if not send_window:
        return due
    zone = ZoneInfo(timezone)
    start, end = time.fromisoformat(send_window["start"]), time.fromisoformat(send_window["end"])
    local_day = due.astimezone(zone).date()
    for offset in range(-1, 9):
        day = local_day + timedelta(days=offset)
        if day.isoweekday() not in send_window["days"]:
            continue
        opens = datetime.combine(day, start, tzinfo=zone).astimezone(UTC)
        closes = datetime.combine(day, end, tzinfo=zone).astimezone(UTC)
        if due < opens:
            return opens
        if due < closes:
            return due
    return due


def mailbox_free_at(entry: dict[str, Any], now: datetime) -> datetime | None:
    """When a mailbox of sending_status may send next: None when it cannot send for this
    campaign at all (disabled, to connect again, campaign paused)."""
    codes = {reason["code"] for reason in entry.get("reasons", [])}
    if codes & BLOCKING:
        return None
    free = now
    for reason in entry.get("reasons", []):
        until = _parse(reason.get("until"))
        if reason["code"] in WAITING and until is not None:
            free = max(free, until)
    earliest = _parse(entry.get("next_send_earliest_at"))
    return max(free, earliest) if earliest else free


def send_plan(
    campaign: models.Campaign,
    status: models.SendingStatus,
    mailboxes: list[models.Mailbox],
    contacts: int,
    now: datetime,
) -> dict[str, Any]:
    """The first send's earliest time and the last first email's, from sending_status."""
    steps = campaign.steps
    if not steps or contacts == 0:
        return {"first_send_at": None, "last_first_send_between": None, "blocked": None}
    pace = {m.id: (m.min_interval_seconds or 0, m.max_interval_seconds or 0) for m in mailboxes}
    free = {
        entry["credential_id"]: at
        for entry in status.mailboxes
        if (at := mailbox_free_at(entry, now)) is not None
    }
    if status.status == "paused" or not free:
        reasons = sorted(
            {r["code"] for entry in status.mailboxes for r in entry.get("reasons", [])}
        )
        return {"first_send_at": None, "last_first_send_between": None, "blocked": reasons}
    delay = steps[0].get("delay_minutes", 0)

    def placed(at: datetime) -> datetime:
        return first_send_at(
            at, delay_minutes=0, timezone=campaign.timezone, send_window=campaign.send_window
        )

    due = now + timedelta(minutes=delay)
    first = min(placed(max(due, at)) for at in free.values())
    # Each mailbox sends one at a time at its pace; the contacts are shared between them.
    per_mailbox = ceil(contacts / len(free)) - 1
    low = max(pace.get(pk, (0, 0))[0] for pk in free) * per_mailbox
    high = max(pace.get(pk, (0, 0))[1] for pk in free) * per_mailbox
    return {
        "first_send_at": _iso(first),
        "last_first_send_between": [
            _iso(first + timedelta(seconds=low)),
            _iso(first + timedelta(seconds=high)),
        ],
        "blocked": None,
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
    contacts'), the mailboxes it would send from at which pace, when the first email
    would go and when the last first email would (from the service's planner), and
    the sends the plan has left this period. `contact_ids` of the answer is the exact
    set a confirmation binds."""
    wanted = None if contact_ids is None else set(contact_ids)
    pending = [
        enrollment
        for enrollment in client.campaigns.enrollments(campaign.id, status="pending", limit=1000)
        if wanted is None or enrollment.contact_id in wanted
    ]
    reached = {e.contact_id for e in pending}
    mailboxes = [client.mailboxes.retrieve(mailbox_id) for mailbox_id in campaign.credential_ids]
    status = client.campaigns.sending_status(campaign.id)
    usage = client.billing.usage()
    plan = send_plan(campaign, status, mailboxes, len(pending), datetime.now(UTC))
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
        **plan,
        "plan_remaining_sends": usage.remaining_sends,
        "monthly_limit": usage.monthly_limit,
    }
    return answer


def outreach_preview(
    client: Client, campaign: models.Campaign, contact: dict[str, Any]
) -> dict[str, Any]:
    """What start_outreach would send: to whom, from which mailboxes, and when."""
    mailboxes = [client.mailboxes.retrieve(mailbox_id) for mailbox_id in campaign.credential_ids]
    status = client.campaigns.sending_status(campaign.id)
    usage = client.billing.usage()
    plan = send_plan(campaign, status, mailboxes, 1, datetime.now(UTC))
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
        "first_send_at": plan["first_send_at"],
        "blocked": plan["blocked"],
        "plan_remaining_sends": usage.remaining_sends,
    }
