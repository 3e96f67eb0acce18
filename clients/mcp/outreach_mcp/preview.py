"""What a dispatch would do, read through the API before anything is sent."""

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

from outreach_sdk import Client, models


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


def dispatch_preview(
    client: Client, campaign: models.Campaign, contact_ids: list[str] | None
) -> dict:
    """The contacts a dispatch would reach (its pending enrollments, all or the named
    contacts'), the mailboxes it would send from, when the first email would go, and the
    sends the plan has left this period."""
    wanted = None if contact_ids is None else set(contact_ids)
    pending = [
        enrollment
        for enrollment in client.campaigns.enrollments(campaign.id, status="pending", limit=1000)
        if wanted is None or enrollment.contact_id in wanted
    ]
    mailboxes = [client.mailboxes.retrieve(mailbox_id) for mailbox_id in campaign.credential_ids]
    usage = client.billing.usage()
    steps = campaign.steps
    first = (
        first_send_at(
            datetime.now(UTC),
            delay_minutes=steps[0].get("delay_minutes", 0),
            timezone=campaign.timezone,
            send_window=campaign.send_window,
        )
        if steps
        else None
    )
    return {
        "campaign_id": campaign.id,
        "campaign_name": campaign.name,
        "contacts": len(pending),
        "sample_contacts": [e.contact_email for e in pending[:5]],
        "steps": len(steps),
        "mailboxes": [
            {
                "id": m.id,
                "from_email": m.from_email,
                "enabled": m.disabled_at is None,
                "daily_limit": m.daily_limit,
            }
            for m in mailboxes
        ],
        "first_send_at": first.isoformat().replace("+00:00", "Z") if first else None,
        "plan_remaining_sends": usage.remaining_sends,
        "monthly_limit": usage.monthly_limit,
    }
