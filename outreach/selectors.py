"""Reads for the outreach resources."""

from collections.abc import Iterable
from uuid import UUID

from django.db.models import Count, Prefetch, Q, QuerySet

from outreach.models import Campaign, CampaignStep, Contact, Enrollment, SmtpCredential

STAT_NAMES = ("enrolled", "sent", "opened", "replied", "bounced", "unsubscribed")


def campaigns_with_relations(queryset: QuerySet[Campaign]) -> QuerySet[Campaign]:
    """Steps and credential ids in two queries for any number of campaigns."""
    return queryset.prefetch_related(
        Prefetch("steps", queryset=CampaignStep.objects.order_by("position")),
        Prefetch("credentials", queryset=SmtpCredential.objects.only("id")),
    )


def campaign_stats(*, campaign_ids: Iterable[UUID]) -> dict[UUID, dict[str, int]]:
    """Enrollment counts per campaign, in one grouped query for any number of campaigns.

    enrolled: every enrollment; sent: enrollments with at least one step sent;
    opened / replied / bounced / unsubscribed: enrollments where that happened.
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
        )
        .order_by()
    )
    for row in rows:
        stats[row["campaign_id"]] = {name: row[name] for name in STAT_NAMES}
    return stats


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
