"""Mailbox selectors."""

from collections.abc import Iterable
from uuid import UUID

from django.db.models import OuterRef, QuerySet, Subquery, Sum
from django.db.models.functions import Coalesce

from accounts.models import Account
from outreach.models.analytics import AnalyticsHour, AnalyticsUtcDay
from outreach.models.mailboxes import SmtpCredential


def credentials_owned(
    *, account: Account, credential_ids: Iterable[UUID]
) -> dict[UUID, SmtpCredential]:
    return {
        credential.pk: credential
        for credential in SmtpCredential.objects.filter(
            account=account, pk__in=list(credential_ids)
        )
    }


def credentials_with_answers(
    queryset: QuerySet[SmtpCredential], names: tuple[str, ...] = ("opened", "replied")
) -> QuerySet[SmtpCredential]:
    """Mailboxes with these analytics counters (outreach.models.analytics.COUNTERS) as
    `<name>_total` integers over all time, 0 before any, in the list's one query: each a
    subquery summing the mailbox's credential-grain days (the tables' unique indexes lead
    with the account, the grain and the credential). Counted from when the hourly rows
    began to be kept; simulated traffic included (it is the mailbox's own)."""
    hours = AnalyticsUtcDay.objects.filter(
        account=OuterRef("account"),
        grain=AnalyticsHour.Grain.CREDENTIAL,
        campaign__isnull=True,
        credential=OuterRef("pk"),
    ).order_by()
    return queryset.annotate(
        **{
            f"{name}_total": Coalesce(
                Subquery(hours.values("credential").annotate(total=Sum(name)).values("total")),
                0,
            )
            for name in names
        }
    )
