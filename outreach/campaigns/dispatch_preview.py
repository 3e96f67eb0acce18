"""A dispatch previewed (`POST /campaigns/:id/dispatch/preview`, docs/outreach.md): what
`POST /campaigns/:id/dispatch` with the same body would do now, read with the dispatch's
own rules (outreach.campaigns.dispatch: its checks, its contacts, `first_send_at`), and
nothing written.

The answer: the contacts it would dispatch (their count, and the first
PREVIEW_CONTACTS_MAX by address with each one's first send time), the first send times
by window time zone (exact for the whole set), the first send time of a contact in the
campaign's time zone (one without a zone of its own, as a new contact of `POST
/outreaches` is), the pending contacts the account's
blocklist would stop, the named contacts it would leave alone, and the refusal the
dispatch would answer instead (the error envelope with its status), or None.

A first send time is when step 1 is due (the enrollment's next_send_at): from then the
scheduler sends it at the pace and daily limit of the campaign's mailboxes
(GET /campaigns/:id/sending_status says why a mailbox waits).
"""

from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db.models import Count, F

from accounts.models import ApiKey
from accounts.send_limits import key_sends_check
from accounts.verification import email_verified_check
from config.api.errors import ServiceError, refusal_json
from outreach.blocklist.selectors import blocked_pending_ids
from outreach.campaigns.dispatch import (
    contact_zones_used,
    dispatch_checks,
    first_send_at,
    not_suppressed,
)
from outreach.models.campaigns import Campaign
from outreach.models.sending import Enrollment

# Contacts the answer names one by one; `dispatched` and `send_times` count them all.
PREVIEW_CONTACTS_MAX = 1000


def _refusal(campaign: Campaign, api_key: ApiKey | None, count: int) -> dict[str, Any] | None:
    """The dispatch's refusal, in the order it checks: the signup address unproven (403),
    nothing to send with (409), the plan's cap (402), the key's daily send limit (429)."""
    try:
        email_verified_check(campaign.account)
        dispatch_checks(campaign)
        key_sends_check(api_key=api_key, count=count)
    except ServiceError as exc:
        return refusal_json(exc)
    return None


def dispatch_preview(
    *,
    campaign: Campaign,
    contact_ids: Sequence[UUID] | None,
    now: datetime,
    api_key: ApiKey | None = None,
) -> dict[str, Any]:
    """What dispatching `contact_ids` (None: every pending contact) would do at `now`."""
    first_step = campaign.steps.order_by("position").first()
    blocked = blocked_pending_ids(
        campaign_id=campaign.pk, account_id=campaign.account_id, contact_ids=contact_ids
    )
    pending = Enrollment.objects.filter(campaign=campaign, status=Enrollment.Status.PENDING)
    if contact_ids is not None:
        pending = pending.filter(contact_id__in=list(contact_ids))
    dispatched = pending.filter(not_suppressed()).exclude(pk__in=blocked)
    zoned = contact_zones_used(campaign)

    def send_at(zone: str) -> datetime | None:
        if first_step is None:
            return None
        return first_send_at(campaign, first_step, now, contact_timezone=zone if zoned else "")

    times: dict[str, datetime | None] = {}
    send_times, count = [], 0
    for row in (
        dispatched.values(zone=F("contact__timezone")).annotate(n=Count("id")).order_by("zone")
    ):
        zone = row["zone"] if zoned else ""
        times.setdefault(zone, send_at(zone))
        count += row["n"]
        send_times.append({"timezone": row["zone"], "contacts": row["n"], "at": times[zone]})
    rows = dispatched.order_by("contact__email", "contact_id").values_list(
        "contact_id", "contact__email", "contact__timezone"
    )[:PREVIEW_CONTACTS_MAX]
    contacts = [
        {
            "contact_id": cid,
            "email": email,
            "timezone": zone,
            "first_send_at": times[zone if zoned else ""],
        }
        for cid, email, zone in rows
    ]
    return {
        "campaign_id": campaign.pk,
        "dispatched": count,
        "first_send_at": min((t for t in times.values() if t is not None), default=None),
        # For a contact without a time zone (the one-call outreach's new contact).
        "campaign_timezone_first_send_at": send_at(""),
        "send_times": send_times,
        "contacts": contacts,
        "has_more": count > len(contacts),
        "blocked": _named(Enrollment.objects.filter(pk__in=blocked)),
        "not_pending": _not_pending(contact_ids, dispatched, blocked),
        "refusal": _refusal(campaign, api_key, count),
    }


def _named(enrollments) -> list[dict[str, Any]]:
    return [
        {"contact_id": cid, "email": email}
        for cid, email in enrollments.order_by("contact__email").values_list(
            "contact_id", "contact__email"
        )[:PREVIEW_CONTACTS_MAX]
    ]


def _not_pending(contact_ids, dispatched, blocked) -> list[UUID]:
    """The named contacts the dispatch would leave alone: not enrolled pending in the
    campaign (already dispatched, ended, or never enrolled), or unsubscribed or bounced."""
    if contact_ids is None:
        return []
    reached = set(dispatched.values_list("contact_id", flat=True))
    reached |= set(Enrollment.objects.filter(pk__in=blocked).values_list("contact_id", flat=True))
    return sorted({cid for cid in contact_ids if cid not in reached}, key=str)
