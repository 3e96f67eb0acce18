"""Reads for the outreach resources."""

from collections.abc import Iterable
from uuid import UUID

from django.db.models import Count, F, OuterRef, Prefetch, Q, QuerySet, Subquery

from outreach.models import (
    Campaign,
    CampaignStep,
    Contact,
    Enrollment,
    Message,
    SmtpCredential,
)
from outreach.variants import step_letters

STAT_NAMES = ("enrolled", "sent", "opened", "replied", "bounced", "unsubscribed", "stopped")
VARIANT_STAT_NAMES = ("sent", "opened", "replied", "bounced")


def campaigns_with_relations(queryset: QuerySet[Campaign]) -> QuerySet[Campaign]:
    """Steps and credential ids in two queries for any number of campaigns."""
    return queryset.prefetch_related(
        Prefetch("steps", queryset=CampaignStep.objects.order_by("position")),
        Prefetch("credentials", queryset=SmtpCredential.objects.only("id")),
    )


def campaign_stats(*, campaign_ids: Iterable[UUID]) -> dict[UUID, dict[str, int]]:
    """Enrollment counts per campaign, in one grouped query for any number of campaigns.

    enrolled: every enrollment; sent: enrollments with at least one step sent;
    opened / replied / bounced / unsubscribed: enrollments where that happened;
    stopped: enrollments ended by a rule or by hand (status `stopped`).
    """
    ids = list(campaign_ids)
    stats = {campaign_id: dict.fromkeys(STAT_NAMES, 0) for campaign_id in ids}
    if not ids:
        return stats
    rows = (
        Enrollment.objects.filter(campaign_id__in=ids)
        .values("campaign_id")
        .annotate(
            enrolled=Count("id"),
            sent=Count("id", filter=Q(sent_at__isnull=False)),
            opened=Count("id", filter=Q(opened_at__isnull=False)),
            replied=Count("id", filter=Q(replied_at__isnull=False)),
            bounced=Count("id", filter=Q(bounced_at__isnull=False)),
            unsubscribed=Count("id", filter=Q(unsubscribed_at__isnull=False)),
            stopped=Count("id", filter=Q(status=Enrollment.Status.STOPPED)),
        )
        .order_by()
    )
    for row in rows:
        stats[row["campaign_id"]] = {name: row[name] for name in STAT_NAMES}
    return stats


def _after_this_message(field: str) -> Q:
    """The enrollment's `field` happened after this message and before the enrollment's
    next one: the message it answers (last touch)."""
    return Q(**{f"enrollment__{field}__gte": F("sent_at")}) & (
        Q(next_sent_at__isnull=True) | Q(**{f"enrollment__{field}__lt": F("next_sent_at")})
    )


def campaign_step_stats(*, campaign: Campaign) -> list[dict]:
    """Per step, per A/B variant: {variant, sent, opened, replied, bounced}, in one
    grouped query over the campaign's messages.

    sent: enrollments sent that step's variant. An open, reply or bounce is an
    enrollment's, not a message's: it is counted for the message the enrollment was
    sent last before it (the step it answers). A bounce at send time, which leaves no
    message, counts in the campaign's `bounced` only. Every variant the step has now is
    listed (zeros when unsent), then any letter only earlier messages carry.
    """
    next_sent = (
        Message.objects.filter(
            enrollment_id=OuterRef("enrollment_id"), sent_at__gt=OuterRef("sent_at")
        )
        .order_by("sent_at")
        .values("sent_at")[:1]
    )
    rows = (
        Message.objects.filter(enrollment__campaign_id=campaign.pk)
        .annotate(next_sent_at=Subquery(next_sent))
        .values("step", "variant")
        .annotate(
            sent=Count("enrollment_id", distinct=True),
            opened=Count("enrollment_id", distinct=True, filter=_after_this_message("opened_at")),
            replied=Count("enrollment_id", distinct=True, filter=_after_this_message("replied_at")),
            bounced=Count("enrollment_id", distinct=True, filter=_after_this_message("bounced_at")),
        )
        .order_by()
    )
    counts: dict[int, dict[str, dict]] = {}
    for row in rows:
        counts.setdefault(row["step"], {})[row["variant"]] = {
            name: row[name] for name in VARIANT_STAT_NAMES
        }
    steps = {step.position: step for step in campaign.steps.all()}
    result = []
    for position in sorted(set(steps) | set(counts)):
        seen = counts.get(position, {})
        letters = step_letters(steps[position]) if position in steps else ""
        letters += "".join(sorted(set(seen) - set(letters)))
        zero = dict.fromkeys(VARIANT_STAT_NAMES, 0)
        result.append(
            {
                "position": position,
                "variants": [{"variant": letter, **seen.get(letter, zero)} for letter in letters],
            }
        )
    return result


def contacts_owned(*, account, contact_ids: Iterable[UUID]) -> set[UUID]:
    return set(
        Contact.objects.filter(account=account, pk__in=list(contact_ids)).values_list(
            "pk", flat=True
        )
    )


def credentials_owned(*, account, credential_ids: Iterable[UUID]) -> dict[UUID, SmtpCredential]:
    return {
        credential.pk: credential
        for credential in SmtpCredential.objects.filter(
            account=account, pk__in=list(credential_ids)
        )
    }
