"""What happens after a simulator mailbox's message was accepted (docs/sandbox.md,
"Outcomes"): the outcome its recipient asks for (`ada+reply@simulator.test`) made as the
input real mail would bring, and handed to the code where that input enters:

- open: the open pixel's service, with the message's own pixel token;
- click: the open, then the click redirect's service with the first tracked link of
  the message as sent;
- reply, ooo, autoreply, remove: the contact's RFC 5322 message (outreach.intake.
  simulated_mail) through the mailbox intake, as a poll reads it (outreach.intake.
  mailbox.message_take: match, keep, label, effects);
- dsn: the receiving server's delivery status report, through the same intake;
- complaint: a spam complaint through the service a relay provider's complaint goes
  through (outreach.intake.relay.relay_event_apply).

Nothing here decides what an input does. Every service is idempotent (a first open,
a first click, a message kept once by its Message-ID, a bounce once, an unsubscribe
once), so an outcome made twice (its task run again, the sweep) changes nothing more.
"""

import logging
import re
from datetime import timedelta

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

from outreach.campaigns.clicks import ClickTarget, click_token_read
from outreach.campaigns.variants import step_content
from outreach.intake import simulated_mail as mail
from outreach.intake.clicks import enrollment_mark_clicked
from outreach.intake.mailbox import message_take
from outreach.intake.relay import COMPLAINT, RelayEvent, RelayOutcome, relay_event_apply
from outreach.intake.services import enrollment_mark_opened
from outreach.models.campaigns import CampaignStep
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Message, SendClaim
from outreach.sending import tokens

logger = logging.getLogger(__name__)

# How far back the sweep looks for a simulator's sends whose outcome is not made yet.
SWEEP_WINDOW = timedelta(hours=1)
_DONE_KEY = "outreach:simulator-outcome:{}"
_URL = re.compile(r"https?://\S+", re.IGNORECASE)
_CLICK_PATH = "/t/c/"


def simulator_outcome_make(*, message_id) -> str:
    """Make the outcome of a simulator's sent message `message_id` (module docstring);
    what it did, in words (the task logs it). A message that is gone, not a simulator's,
    or whose recipient asks for no later outcome: nothing."""
    message = (
        Message.objects.select_related("enrollment__contact", "enrollment__campaign", "credential")
        .filter(pk=message_id)
        .first()
    )
    if message is None:
        return "message gone"
    credential = message.credential
    if credential is None or not credential.is_simulator:
        return "not a simulator's message"
    outcome = mail.recipient_outcome(message.to_email)
    if outcome not in mail.LATER_OUTCOMES:
        return f"no later outcome ({outcome or 'delivered'})"
    done = _OUTCOMES[outcome](message, credential)
    cache.set(_DONE_KEY.format(message.pk), 1, timeout=int(SWEEP_WINDOW.total_seconds()) * 2)
    logger.info("simulator message %s: %s: %s", message.pk, outcome, done)
    return f"{outcome}: {done}"


def _open(message: Message, credential: SmtpCredential) -> str:
    token = pixel_token(message)
    if token is None:
        return "no open pixel in the message"
    named = tokens.token_names(purpose=tokens.OPEN, token=token)
    assert named is not None  # made just now
    first = enrollment_mark_opened(enrollment_id=named.enrollment_id, step=named.step)
    return "opened" if first else "opened before"


def pixel_token(message: Message) -> str | None:
    """The open pixel's token in the message as sent (outreach.sending.message puts one
    in the HTML part when the campaign tracks opens), or None when it carried none: a
    text-only step, opens not tracked, or the step deleted since."""
    campaign = message.enrollment.campaign
    if not campaign.track_opens:
        return None
    step = CampaignStep.objects.filter(campaign_id=campaign.pk, position=message.step).first()
    if step is None or not step_content(step, message.variant).body_html.strip():
        return None
    # Signed without a timestamp: the same token the message carries (it names the step).
    return tokens.token_make(
        purpose=tokens.OPEN, enrollment_id=message.enrollment_id, step=message.step
    )


def first_tracked_link(message: Message) -> ClickTarget | None:
    """The first tracked link (the click redirect's) of the message's text as sent, as
    the redirect reads its token; None without one (clicks not tracked, no link)."""
    for found in _URL.finditer(message.text or ""):
        url = found.group(0).rstrip(".,;:!?'\")]}>")
        _, marker, token = url.partition(_CLICK_PATH)
        if marker and token:
            target = click_token_read(token)
            if target is not None:
                return target
    return None


def _click(message: Message, credential: SmtpCredential) -> str:
    opened = _open(message, credential)
    target = first_tracked_link(message)
    if target is None:
        return f"{opened}; no tracked link in the message"
    first = enrollment_mark_clicked(target=target)
    return f"{opened}; {'clicked' if first else 'clicked before'} {target.url}"


def _contact_mail(message: Message, credential: SmtpCredential) -> str:
    outcome = mail.recipient_outcome(message.to_email)
    raw = mail.contact_message(message=message, outcome=outcome, now=timezone.now())
    return _take(message, credential, raw, outcome)


def _delivery_report(message: Message, credential: SmtpCredential) -> str:
    raw = mail.delivery_report(message=message, now=timezone.now())
    return _take(message, credential, raw, mail.DSN)


def _take(message: Message, credential: SmtpCredential, raw: bytes, outcome: str) -> str:
    fallback = mail.simulated_message_id(message, outcome)
    taken = message_take(credential=credential, raw=raw, fallback_id=fallback)
    return f"{taken.kind} {taken.detail}".strip()


def _complaint(message: Message, credential: SmtpCredential) -> str:
    event = RelayEvent(kind=COMPLAINT, message_id=message.message_id, recipient=message.to_email)
    outcome = RelayOutcome(received=1)
    # In a transaction of its own, as a provider's batch is applied.
    with transaction.atomic():
        relay_event_apply(credential=credential, event=event, outcome=outcome)
    return f"unsubscribed {outcome.unsubscribed}, ignored {outcome.ignored}"


_OUTCOMES = {
    mail.OPEN: _open,
    mail.CLICK: _click,
    mail.REPLY: _contact_mail,
    mail.OUT_OF_OFFICE: _contact_mail,
    mail.AUTO_REPLY: _contact_mail,
    mail.REMOVE: _contact_mail,
    mail.DSN: _delivery_report,
    mail.COMPLAINT: _complaint,
}


def simulator_outcomes_due(*, now=None) -> list[str]:
    """The simulators' sent messages (within SWEEP_WINDOW) whose outcome was not made
    SIMULATOR_DELAY_SECONDS after their send: their task was lost (a worker that died
    with it, a broker that dropped it). Read through the attempts' index by mailbox and
    time; those made already are known by a mark in the cache (a lost mark costs one
    idempotent run more)."""
    now = now or timezone.now()
    delay = timedelta(seconds=settings.SIMULATOR_DELAY_SECONDS)
    simulators = SmtpCredential.objects.filter(auth_method=SmtpCredential.AuthMethod.SIMULATOR)
    sent_ids = list(
        SendClaim.objects.filter(
            credential__in=simulators,
            claimed_at__gte=now - SWEEP_WINDOW,
            finished_at__lte=now - delay,
            outcome=SendClaim.Outcome.SENT,
            to_email__iendswith=f"@{mail.SIMULATOR_DOMAIN}",
            to_email__contains="+",
        ).values_list("message_id", flat=True)[:1000]
    )
    if not sent_ids:
        return []
    messages = [
        (str(pk), to_email)
        for pk, to_email in Message.objects.filter(message_id__in=sent_ids).values_list(
            "pk", "to_email"
        )
    ]
    due = [
        pk for pk, to_email in messages if mail.recipient_outcome(to_email) in mail.LATER_OUTCOMES
    ]
    done = cache.get_many([_DONE_KEY.format(pk) for pk in due])
    return [pk for pk in due if _DONE_KEY.format(pk) not in done]
