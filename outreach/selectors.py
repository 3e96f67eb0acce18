"""Reads for the outreach resources."""

from collections.abc import Iterable
from uuid import UUID

from django.db.models import (
    Aggregate,
    Count,
    F,
    Func,
    JSONField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
)
from django.db.models.functions import JSONObject

from outreach.enrollments import STAT_NAMES
from outreach.models import (
    Campaign,
    CampaignStats,
    CampaignStep,
    Contact,
    Message,
    SmtpCredential,
)
from outreach.variants import step_letters

VARIANT_STAT_NAMES = ("sent", "opened", "replied", "bounced")


class JSONList(Aggregate):
    """The JSON array of an expression's values over a group, in no particular order
    (PostgreSQL jsonb_agg, SQLite json_group_array)."""

    function = "JSONB_AGG"
    output_field = JSONField()

    def as_sqlite(self, compiler, connection, **extra_context):
        return super().as_sql(compiler, connection, function="JSON_GROUP_ARRAY", **extra_context)


class JSONColumn(Func):
    """A JSON column as a value inside a JSON object (SQLite keeps JSON as text, which
    JSON_OBJECT would embed as a string; json() makes it JSON again)."""

    template = "%(expressions)s"
    output_field = JSONField()

    def as_sqlite(self, compiler, connection, **extra_context):
        return super().as_sql(compiler, connection, template="JSON(%(expressions)s)")


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
            variants=JSONColumn("variants"),
        ),
        credential_rows=_rows(
            SmtpCredential.objects.filter(campaigns=OuterRef("pk")),
            "campaigns",
            id="id",
            created_at="created_at",
        ),
    )


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
