"""Reads for campaigns: campaigns with their steps and mailboxes, their enrollments,
per-step stats."""

from django.db.models import Aggregate, JSONField, OuterRef, QuerySet, Subquery, Sum
from django.db.models.functions import Coalesce, JSONObject

from config.api.ids import is_uuid
from outreach.campaigns.variants import step_letters
from outreach.enrollments import STAT_NAMES, VARIANT_STAT_NAMES, variant_stats_read
from outreach.enrollments.branching import branch_stats_read
from outreach.errors import EnrollmentNotFound
from outreach.models.campaigns import Campaign, CampaignStats, CampaignStep
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Enrollment


class JSONList(Aggregate):
    """The JSON array of an expression's values over a group, in no particular order."""

    function = "JSONB_AGG"
    output_field = JSONField()


def _rows(queryset: QuerySet, group: str, **columns) -> Subquery:
    return Subquery(
        queryset.order_by()
        .values(group)
        .annotate(rows=JSONList(JSONObject(**columns)))
        .values("rows"),
        output_field=JSONField(),
    )


def campaigns_with_counts(
    queryset: QuerySet[Campaign], names: tuple[str, ...] = ("sent", "opened", "replied")
) -> QuerySet[Campaign]:
    """Campaigns with these stats (STAT_NAMES) as `<name>_total` integers, 0 before any
    count, in the list's one query (the admin's campaign list sorts by them): each a
    subquery summing the campaign's few shard rows (outreach.enrollments.stats_read)."""
    return queryset.annotate(
        **{
            f"{name}_total": Coalesce(
                Subquery(
                    CampaignStats.objects.filter(campaign=OuterRef("pk"))
                    .order_by()
                    .values("campaign")
                    .annotate(total=Sum(name))
                    .values("total")
                ),
                0,
            )
            for name in names
        }
    )


def campaigns_with_relations(queryset: QuerySet[Campaign]) -> QuerySet[Campaign]:
    """Campaigns with what their representation shows, in the one query of the page, as
    JSON: the stats (`stats_json`, null before any count), the steps (`step_rows`) and the
    mailboxes (`credential_rows`). A page of campaigns is GET /campaigns's hot path: each
    query more is a round trip a web worker waits on, and the list compiles this query
    once (config.api.pagination's `extend`)."""
    return queryset.annotate(
        stats_json=Subquery(
            # The campaign's shards summed (outreach.enrollments.stats_read).
            CampaignStats.objects.filter(campaign=OuterRef("pk"))
            .order_by()
            .values("campaign")
            .values(json=JSONObject(**{name: Sum(name) for name in STAT_NAMES})),
            output_field=JSONField(),
        ),
        step_rows=_rows(
            CampaignStep.objects.filter(campaign=OuterRef("pk")),
            "campaign",
            position="position",
            key="key",
            next_key="next_key",
            branch="branch",
            subject="subject",
            body_text="body_text",
            body_html="body_html",
            delay_minutes="delay_minutes",
            variants="variants",
        ),
        credential_rows=_rows(
            SmtpCredential.objects.filter(campaigns=OuterRef("pk")),
            "campaigns",
            id="id",
            created_at="created_at",
        ),
    )


def campaign_step_stats(*, campaign: Campaign, elements: list | None = None) -> list[dict]:
    """Per email step (its `key` beside its position), per A/B variant: {variant, sent,
    opened, replied, bounced}, from the
    counts kept on write (outreach.enrollments; one small query whatever the campaign's
    size).

    sent: messages that carried the step's variant. An open, reply or bounce is an
    enrollment's, not a message's: it counts for the last step the enrollment was sent
    when it arrived (Enrollment.opened_on, ...). A bounce before any message counts in
    the campaign's `bounced` only. Every variant the step has now is listed (zeros when
    unsent), then any letter only earlier messages carry.
    """
    counts: dict[int, dict[str, dict]] = {}
    for (step, variant), row in variant_stats_read(campaign_id=campaign.pk).items():
        counts.setdefault(step, {})[variant] = row
    # Email steps: a branch sends nothing (campaign_branch_stats counts its decisions).
    if elements is None:
        elements = list(campaign.steps.all())
    steps = {step.position: step for step in elements if not step.branch}
    result = []
    for position in sorted(set(steps) | set(counts)):
        seen = counts.get(position, {})
        letters = step_letters(steps[position]) if position in steps else ""
        letters += "".join(sorted(set(seen) - set(letters)))
        zero = dict.fromkeys(VARIANT_STAT_NAMES, 0)
        result.append(
            {
                "position": position,
                "key": steps[position].key if position in steps else None,
                "variants": [{"variant": letter, **seen.get(letter, zero)} for letter in letters],
            }
        )
    return result


def campaign_branch_stats(*, campaign: Campaign, elements: list) -> list[dict]:
    """Per branch among the campaign's `elements` (its steps), in their order: {key,
    waiting, then_count, else_count} (outreach.enrollments.branching.branch_stats_read:
    the decisions counted on write, the waiting ones read from their partial index,
    never a scan of the campaign's enrollments; no query without a branch)."""
    keys = [step.key for step in sorted(elements, key=lambda s: s.position) if step.branch]
    return branch_stats_read(campaign_id=campaign.pk, keys=keys)


def campaign_with_relations(*, campaign_id) -> Campaign:
    """One campaign with what its representation shows (campaigns_with_relations)."""
    return campaigns_with_relations(Campaign.objects.filter(pk=campaign_id)).get()


def campaign_enrollments(*, campaign: Campaign, status: str = "") -> QuerySet[Enrollment]:
    """The campaign's enrollments (in `status` when given), each with its contact and its
    campaign's first key (`first_key`: where a pending one starts), in the page's query."""
    queryset = (
        Enrollment.objects.filter(campaign=campaign)
        .select_related("contact")
        .annotate(first_key=_first_key())
    )
    if status:
        queryset = queryset.filter(status=status)
    return queryset


def _first_key() -> Subquery:
    return Subquery(
        CampaignStep.objects.filter(campaign_id=OuterRef("campaign_id"))
        .order_by("position")
        .values("key")[:1]
    )


def campaign_enrollment(*, campaign: Campaign, enrollment_id) -> Enrollment:
    """One enrollment of the campaign (already scoped to the caller's account), with its
    contact, by the id a request gave; EnrollmentNotFound for any other id."""
    enrollment = None
    if is_uuid(enrollment_id):
        enrollment = (
            Enrollment.objects.filter(pk=enrollment_id, campaign=campaign)
            .select_related("contact")
            .first()
        )
    if enrollment is None:
        raise EnrollmentNotFound()
    return enrollment
