"""Enrollments ended by a rule or by hand, not by the contact: status `stopped`.

Two transitions, each one conditional UPDATE on the current status, so a stop never
overwrites an enrollment that ended meanwhile (a reply, a bounce, the last step sent):

- `enrollment_stop`: by hand (POST /campaigns/:id/enrollments/:enrollment_id/stop);
- `enrollments_stop_same_domain`: a reply in a campaign with stop_on_domain_reply stops
  the campaign's other active enrollments whose contact has the replier's email domain,
  unless it is a consumer mail domain (outreach.domains.consumer), where sharing a domain
  says nothing about sharing a company.

Neither fires a webhook event: the contact did nothing. A claim already handed to a
sender is not sent once its enrollment is stopped (the sender's start mark checks the
status), and a send already under way is recorded without moving the enrollment.
"""

from datetime import datetime

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from outreach.campaigns.state import campaigns_complete_if_done
from outreach.domains.consumer import is_consumer_domain
from outreach.domains.recipients import email_domain
from outreach.enrollments import counting, enrollments_stop
from outreach.models.sending import Enrollment


def enrollment_stop(*, enrollment_id, at: datetime | None = None) -> bool:
    """Stop one enrollment by hand. Returns False when it is no longer active (it ended
    before, or meanwhile): nothing is changed then."""
    at = at or timezone.now()
    with transaction.atomic(), counting():
        enrollment = Enrollment.objects.filter(pk=enrollment_id).only("campaign_id").first()
        if enrollment is None:
            return False
        stopped = enrollments_stop(
            Enrollment.objects.filter(pk=enrollment_id),
            campaign_id=enrollment.campaign_id,
            reason=Enrollment.StopReason.MANUAL,
            at=at,
        )
        if stopped:
            # It may have been the campaign's last active enrollment.
            campaigns_complete_if_done(campaign_ids=[enrollment.campaign_id], at=at)
    return bool(stopped)


def _same_domain(campaign_id, domain: str) -> Q:
    return Q(
        campaign_id=campaign_id,
        status__in=Enrollment.ACTIVE_STATUSES,
        contact__email_lower__endswith=f"@{domain}",
    )


def domain_reply_lock(*, enrollment_id) -> list:
    """Lock, in primary key order, a replying enrollment and the colleagues its reply
    may stop, before the reply locks anything else. Two colleagues replying at once
    each lock their own row and then want the other's: taken in one order, the second
    waits for the first instead of deadlocking. Call it inside the reply's transaction;
    nothing is locked when the campaign does not stop on domain replies. Returns the ids
    locked: the only colleagues the reply may stop (one enrolled since waits for the next
    reply; locking it now could deadlock with another reply's lock)."""
    row = (
        Enrollment.objects.filter(pk=enrollment_id)
        .values("campaign_id", "campaign__stop_on_domain_reply", "contact__email_lower")
        .first()
    )
    if row is None or not row["campaign__stop_on_domain_reply"]:
        return []
    domain = email_domain(row["contact__email_lower"])
    if not domain or is_consumer_domain(domain):
        return []
    return list(
        Enrollment.objects.select_for_update(of=("self",), no_key=True)
        .filter(Q(pk=enrollment_id) | _same_domain(row["campaign_id"], domain))
        .order_by("pk")
        .values_list("pk", flat=True)
    )


def enrollments_stop_same_domain(*, enrollment: Enrollment, locked: list, at: datetime) -> int:
    """After `enrollment`'s contact replied: stop the campaign's other active enrollments
    at the same email domain, when the campaign asks for it and the domain is not a
    consumer one, among those domain_reply_lock locked (`locked`). Runs inside the reply's
    transaction. Returns how many it stopped."""
    campaign = enrollment.campaign
    if not campaign.stop_on_domain_reply:
        return 0
    domain = email_domain(enrollment.contact.email_lower)
    if not domain or is_consumer_domain(domain):
        return 0
    # By id, the status checked on the row itself: an UPDATE joined to contacts would not
    # re-check the status of a row another transaction changed meanwhile.
    stopped = enrollments_stop(
        Enrollment.objects.filter(pk__in=locked).exclude(pk=enrollment.pk),
        campaign_id=campaign.pk,
        reason=Enrollment.StopReason.DOMAIN_REPLY,
        at=at,
    )
    if stopped:
        campaigns_complete_if_done(campaign_ids=[campaign.pk], at=at)
    return stopped
