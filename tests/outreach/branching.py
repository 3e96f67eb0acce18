"""Campaigns whose steps are a graph (API.md 17), made as the API stores them, and the
clock and sends the branch tests drive."""

from datetime import timedelta

from django.utils import timezone

from outreach.models.campaigns import Campaign, CampaignStep
from outreach.models.sending import Enrollment, Message
from outreach.sending.scheduler import schedule_due
from outreach.sending.send import batch_send
from tests.outreach.factories import CampaignFactory, ContactFactory, EnrollmentFactory
from webhooks.models import Event

DAY = 24 * 60


def email(key: str, next_key: str = "", *, delay: int = 0, subject: str = "") -> dict:
    return {"key": key, "next_key": next_key, "delay_minutes": delay, "subject": subject}


def branch(key: str, *, on="opened", of="any", within=DAY, then="end", else_="end") -> dict:
    return {
        "key": key,
        "branch": {"on": on, "of": of, "within_minutes": within, "then": then, "else": else_},
    }


# intro, then nudge an hour later, then a branch on opens of the intro: the case study,
# or a bump. An intro opened before the nudge goes out is decided by the nudge's send.
NUDGE_THEN_BRANCH = [
    email("intro", "nudge"),
    email("nudge", "wait", delay=60),
    branch("wait", of="intro", then="case_study", else_="bump"),
    email("case_study", "end"),
    email("bump", "end"),
]


def graph_campaign(sink, elements: list[dict], **fields) -> Campaign:
    """An active campaign of `elements` (email() and branch() above, in order), its one
    mailbox sending to `sink`; emails carry an HTML part (the open pixel) and a link."""
    campaign = CampaignFactory(with_steps=0, status=Campaign.Status.ACTIVE, **fields)
    credential = campaign.credentials.get()
    credential.smtp_host, credential.smtp_port = sink.host, sink.port
    credential.smtp_security, credential.smtp_username, credential.smtp_password = "none", "", ""
    credential.save()
    for position, element in enumerate(elements, start=1):
        if "branch" in element:
            CampaignStep.objects.create(
                campaign=campaign,
                position=position,
                key=element["key"],
                branch=element["branch"],
                body_text="",
            )
            continue
        key = element["key"]
        CampaignStep.objects.create(
            campaign=campaign,
            position=position,
            key=key,
            next_key=element["next_key"],
            subject=element["subject"] or (f"About {key}" if position == 1 else ""),
            body_text=f"Text of {key}: https://example.com/{key}",
            body_html=f'<p>HTML of {key} <a href="https://example.com/{key}">link</a></p>',
            delay_minutes=element["delay_minutes"],
        )
    return campaign


def enrolled(campaign: Campaign, *, at=None, **contact) -> Enrollment:
    """An enrollment dispatched at `at`, at the campaign's first element."""
    at = at or timezone.now()
    first = campaign.steps.order_by("position").first()
    return EnrollmentFactory(
        campaign=campaign,
        contact=ContactFactory(account=campaign.account, **contact),
        status=Enrollment.Status.SCHEDULED,
        next_send_at=at,
        dispatched_at=at,
        current_key=first.key if first else None,
    )


def run(now) -> list:
    """One scheduler run at `now`, then every batch it claimed, sent with that clock."""
    batches = schedule_due(now=now)
    return [
        batch_send(batch_id=b.batch_id, credential_id=b.credential_id, clock=lambda: now)
        for b in batches
    ]


def message_of(enrollment: Enrollment, key: str) -> Message:
    return Message.objects.get(enrollment=enrollment, step_key=key)


def branched_events() -> list[dict]:
    return [e.data for e in Event.objects.filter(type="enrollment.branched").order_by("created_at")]


def later(now, minutes: int):
    return now + timedelta(minutes=minutes)
