"""Permanent bounces and the protection they trigger, shared by every bounce source:
the sender (SMTP 5xx on RCPT/DATA) and intake (relay-provider events, delivery status
reports in the mailbox).

    enrollment_mark_bounced(enrollment=..., reason="550 5.1.1 no such user")

Each bounce is classified (outreach.bounce_types: `hard`, `soft` or `block`, and a
category); the source passes its class, or the reason's words are read here.
In one transaction:
1. the enrollment becomes `bounced` (bounced_at, bounce_reason, bounce_type,
   bounce_category, no further sends) -- a conditional UPDATE, so a second bounce for it
   changes nothing and fires nothing;
2. a `hard` bounce only (the address will never accept): the contact is suppressed
   (bounced_at), and its address recorded on the account's suppression list
   (outreach.contacts.suppression): never sent to or enrolled again, even once the
   contact is deleted and re-added. After a `soft` or `block` bounce the contact stays
   sendable by other campaigns and mailboxes;
3. the bounce, whatever its type, is counted on the credential (bounced_count) and in its per-campaign
   stats; `enrollment.bounced` is emitted;
4. the credential's bounce rate in that campaign (bounces / sends, once it has at least
   BOUNCE_RATE_MIN_SENDS sends there) is compared with the campaign's
   bounce_threshold_percent; strictly above it, the credential is disabled
   (bounce_rate_exceeded) and `credential.disabled` is emitted -- once, by whichever
   transaction wins the conditional UPDATE;
5. every active campaign of that credential whose credentials are now all disabled is
   paused (all_credentials_disabled) with one `campaign.paused` each -- the campaigns
   are locked first, so two credentials disabled concurrently still pause it exactly once
   (outreach.campaigns.state, which the scheduler calls too);
6. the enrollment's campaign, still active with no active enrollment left, is completed
   (outreach.campaigns.state, the check the sending engine runs after a batch);
7. a `block` bounce (its class read from the reason, outreach.bounce_types) is a strike
   of the circuit breaker toward the recipient's provider (outreach.sending.breaker).
"""

import logging
from datetime import datetime

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from outreach.bounce_types import HARD, BounceClass, classify
from outreach.campaigns.state import campaigns_complete_if_done, campaigns_pause_if_unsendable
from outreach.contacts.suppression import suppression_record
from outreach.enrollments import counting, enrollment_bounce
from outreach.events import (
    ENROLLMENT_BOUNCED,
    credential_disabled_emit,
    enrollment_emit,
)
from outreach.models.campaigns import Campaign
from outreach.models.contacts import Contact, Suppression
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import CredentialCampaignStats, Enrollment
from outreach.sending.breaker import strike_from_reply

logger = logging.getLogger(__name__)

# A rate over fewer sends than this says little: one bounce in three sends is not 33%.
BOUNCE_RATE_MIN_SENDS = 20
BOUNCE_REASON_MAX_CHARS = 1000


def stats_increment(*, credential_id, campaign_id, sends: int = 0, bounces: int = 0) -> None:
    """Add to a (credential, campaign) stats row, creating it on first use. Atomic under
    concurrency: an UPDATE with F(), or an INSERT that loses a race and updates instead."""
    changes = {}
    if sends:
        changes["sends"] = F("sends") + sends
    if bounces:
        changes["bounces"] = F("bounces") + bounces
    rows = CredentialCampaignStats.objects.filter(
        credential_id=credential_id, campaign_id=campaign_id
    )
    if rows.update(**changes):
        return
    try:
        with transaction.atomic():
            CredentialCampaignStats.objects.create(
                credential_id=credential_id, campaign_id=campaign_id, sends=sends, bounces=bounces
            )
    except IntegrityError:
        rows.update(**changes)


def enrollment_mark_bounced(
    *,
    enrollment: Enrollment,
    reason: str,
    at: datetime | None = None,
    credential: SmtpCredential | None = None,
    rejected_at_send: bool = False,
    bounce_class: BounceClass | None = None,
) -> bool:
    # Long: the one bounce rule, its steps in one transaction (module docstring).
    """Record a permanent bounce of `enrollment` (see the module docstring for the rules).

    `bounce_class`: what the bounce meant, as its source read it (a report's status and
    diagnostic, an SMTP reply's code and words, a provider's event type); by default the
    reason's words are classified (an SMTP reply's text begins with its code).

    `credential`: the mailbox that sent the bounced message (intake: the Message's
    credential); defaults to the enrollment's thread mailbox. `rejected_at_send`: the
    server refused the message during the SMTP transaction, so no Message row counted it
    as a send: this attempt is counted as one (the sender passes True).

    Returns True when this call bounced the enrollment, False when it was already
    bounced (then nothing is written and nothing is emitted).
    """
    at = at or timezone.now()
    reason = (reason or "bounced").strip()[:BOUNCE_REASON_MAX_CHARS] or "bounced"
    klass = bounce_class or classify(code=None, text=reason)
    with transaction.atomic(), counting():
        # The contact before its enrollment: the order of every change that locks both
        # (an unsubscribe, a deleted contact).
        list(
            Contact.objects.select_for_update(no_key=True)
            .filter(pk=enrollment.contact_id)
            .values_list("pk")
        )
        row = enrollment_bounce(
            enrollment_id=enrollment.pk,
            reason=reason,
            at=at,
            bounce_type=klass.type,
            bounce_category=klass.category,
        )
        if row is None:
            return False
        if klass.type == HARD:
            # updated_at: the write's wall clock, which the scheduler's sweep of
            # suppressed contacts reads (outreach.sending.recovery.suppressed_end).
            Contact.objects.filter(pk=row.contact_id, bounced_at__isnull=True).update(
                bounced_at=at, updated_at=timezone.now()
            )
            suppression_record(
                account_id=row.contact.account_id,
                email=row.contact.email_lower,
                reason=Suppression.Reason.BOUNCED,
                at=at,
            )
        credential_id = credential.pk if credential is not None else row.credential_id
        if credential_id is not None:
            _mailbox_count(
                row,
                credential_id=credential_id,
                rejected_at_send=rejected_at_send,
                klass=klass,
                reason=reason,
                at=at,
            )
        else:
            enrollment_emit(enrollment=row, event_type=ENROLLMENT_BOUNCED)
        # The bounce may have ended the campaign's last active enrollment.
        campaigns_complete_if_done(campaign_ids=[row.campaign_id], at=at)
    for name in (
        "status",
        "bounced_at",
        "bounce_reason",
        "bounce_type",
        "bounce_category",
        "next_send_at",
    ):
        setattr(enrollment, name, getattr(row, name))
    return True


def _mailbox_count(
    row: Enrollment,
    *,
    credential_id,
    rejected_at_send: bool,
    klass: BounceClass,
    reason: str,
    at: datetime,
) -> None:
    """Steps 3, 4 and 7 for the mailbox that sent the bounced message: counted, the
    event, its bounce rate checked, and a `block` a strike toward the provider."""
    SmtpCredential.objects.filter(pk=credential_id).update(bounced_count=F("bounced_count") + 1)
    stats_increment(
        credential_id=credential_id,
        campaign_id=row.campaign_id,
        sends=1 if rejected_at_send else 0,
        bounces=1,
    )
    enrollment_emit(enrollment=row, event_type=ENROLLMENT_BOUNCED)
    _protect(credential_id=credential_id, campaign=row.campaign, at=at)
    strike_from_reply(
        credential_id=credential_id,
        email=row.contact.email_lower,
        code=None,
        text=reason,
        at=at,
        klass=klass,
    )


def _protect(*, credential_id, campaign: Campaign, at: datetime) -> None:
    """Steps 4 and 5: disable the credential over the threshold, pause what it leaves
    without a mailbox. Runs inside the bounce's transaction."""
    stats = CredentialCampaignStats.objects.get(credential_id=credential_id, campaign=campaign)
    if stats.sends < BOUNCE_RATE_MIN_SENDS:
        return
    rate = stats.bounce_rate
    threshold = campaign.bounce_threshold_percent
    if rate <= threshold:
        return
    disabled = SmtpCredential.objects.filter(pk=credential_id, disabled_at__isnull=True).update(
        disabled_at=at,
        disabled_reason=SmtpCredential.DisabledReason.BOUNCE_RATE_EXCEEDED,
        updated_at=at,
    )
    if not disabled:
        return  # already disabled (by hand, or by a concurrent bounce that fired the event)
    credential = SmtpCredential.objects.get(pk=credential_id)
    logger.warning(
        "credential %s disabled: bounce rate %.2f%% over %.2f%% in campaign %s",
        credential_id,
        rate,
        threshold,
        campaign.pk,
    )
    credential_disabled_emit(
        credential=credential, campaign=campaign, bounce_rate=rate, threshold=threshold
    )
    campaigns_pause_without_credentials(credential_id=credential_id, at=at)


def campaigns_pause_without_credentials(*, credential_id, at: datetime | None = None) -> list:
    """Pause every active campaign of this credential that has no enabled credential left.
    Returns the campaigns paused. Call it inside the transaction that disabled it."""
    campaign_ids = Campaign.objects.filter(
        credentials__id=credential_id, status=Campaign.Status.ACTIVE
    ).values_list("pk", flat=True)
    return campaigns_pause_if_unsendable(campaign_ids=list(campaign_ids), at=at)
