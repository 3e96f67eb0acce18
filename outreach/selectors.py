"""Reads for the outreach resources."""

from collections.abc import Iterable
from uuid import UUID

from django.db.models import Prefetch, QuerySet

from outreach.models import Campaign, CampaignStep, Contact, SmtpCredential


def campaigns_with_relations(queryset: QuerySet[Campaign]) -> QuerySet[Campaign]:
    """Stats with the campaigns (one join), steps and credential ids in two queries for
    any number of campaigns."""
    return queryset.select_related("stats_row").prefetch_related(
        Prefetch("steps", queryset=CampaignStep.objects.order_by("position")),
        Prefetch("credentials", queryset=SmtpCredential.objects.only("id")),
    )


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
