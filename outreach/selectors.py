"""Reads for the outreach resources."""

from collections.abc import Iterable
from uuid import UUID

from django.db.models import Aggregate, JSONField, OuterRef, QuerySet, Subquery
from django.db.models.functions import JSONObject

from outreach.enrollments import STAT_NAMES
from outreach.models import Campaign, CampaignStats, CampaignStep, Contact, SmtpCredential


class JSONList(Aggregate):
    """The JSON array of an expression's values over a group, in no particular order
    (PostgreSQL jsonb_agg, SQLite json_group_array)."""

    function = "JSONB_AGG"
    output_field = JSONField()

    def as_sqlite(self, compiler, connection, **extra_context):
        return super().as_sql(compiler, connection, function="JSON_GROUP_ARRAY", **extra_context)


def _rows(queryset: QuerySet, group: str, **columns) -> Subquery:
    return Subquery(
        queryset.order_by()
        .values(group)
        .annotate(rows=JSONList(JSONObject(**columns)))
        .values("rows"),
        output_field=JSONField(),
    )


def campaigns_with_relations(queryset: QuerySet[Campaign]) -> QuerySet[Campaign]:
    """Campaigns with what their representation shows, in the one query of the page, as
    JSON: the stats (`stats_json`, null before any count), the steps (`step_rows`) and the
    mailboxes (`credential_rows`). A page of campaigns is GET /campaigns's hot path: each
    query more is a round trip a web worker waits on, and the list compiles this query
    once (config.api.pagination's `extend`)."""
    return queryset.annotate(
        stats_json=Subquery(
            CampaignStats.objects.filter(pk=OuterRef("pk")).values(
                json=JSONObject(**{name: name for name in STAT_NAMES})
            ),
            output_field=JSONField(),
        ),
        step_rows=_rows(
            CampaignStep.objects.filter(campaign=OuterRef("pk")),
            "campaign",
            position="position",
            subject="subject",
            body_text="body_text",
            body_html="body_html",
            delay_minutes="delay_minutes",
        ),
        credential_rows=_rows(
            SmtpCredential.objects.filter(campaigns=OuterRef("pk")),
            "campaigns",
            id="id",
            created_at="created_at",
        ),
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
