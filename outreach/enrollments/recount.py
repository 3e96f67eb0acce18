"""A campaign's kept stats against a recount from its enrollments and messages
(`manage.py campaign_stats`): the recounts, and the check that compares and repairs
the kept rows, exact beside running writers (docs/outreach.md, "Campaign stats")."""

from collections import defaultdict
from collections.abc import Iterable
from typing import Any
from uuid import UUID

from django.db import transaction
from django.db.models import Count, Q

from config.db.counters import shard_count
from outreach.enrollments.stats import (
    ANSWERS,
    STAT_NAMES,
    VARIANT_STAT_NAMES,
    answer_split,
    stats_read,
    variant_stats_read,
)
from outreach.models.branches import BranchDecision
from outreach.models.campaigns import BranchStats, CampaignStats, CampaignStep, StepVariantStats
from outreach.models.sending import Enrollment, Message

# What each count counts, as a filter on enrollments (for recounts).
_COUNTED = {
    "enrolled": Q(),
    "sent": Q(sent_at__isnull=False),
    "opened": Q(opened_at__isnull=False),
    "clicked": Q(clicked_at__isnull=False),
    "replied": Q(replied_at__isnull=False),
    "bounced": Q(bounced_at__isnull=False),
    "unsubscribed": Q(unsubscribed_at__isnull=False),
    "stopped": Q(stopped_at__isnull=False),
}


def stats_recount(*, campaign_ids: Iterable[UUID]) -> dict[UUID, dict[str, int]]:
    """The stats of these campaigns counted from their enrollments (one grouped query)."""
    ids = list(campaign_ids)
    stats = {campaign_id: dict.fromkeys(STAT_NAMES, 0) for campaign_id in ids}
    rows = (
        Enrollment.objects.filter(campaign_id__in=ids)
        .values("campaign_id")
        .annotate(**{name: Count("id", filter=rule) for name, rule in _COUNTED.items()})
        .order_by()
    )
    for row in rows:
        counts: dict[str, Any] = dict(row)  # one key per annotation, named at run time
        stats[counts["campaign_id"]] = {name: counts[name] for name in STAT_NAMES}
    return stats


def variant_stats_recount(*, campaign_id) -> dict[tuple[int, str], dict[str, int]]:
    """A campaign's step variant counts from its messages and enrollments."""
    stats: defaultdict[tuple[int, str], dict[str, int]] = defaultdict(
        lambda: dict.fromkeys(VARIANT_STAT_NAMES, 0)
    )
    sent = (
        Message.objects.filter(enrollment__campaign_id=campaign_id)
        .values_list("step", "variant")
        .annotate(n=Count("id"))
        .order_by()
    )
    for step, variant, n in sent:
        stats[(step, variant)]["sent"] = n
    for name in ANSWERS:
        answers = (
            Enrollment.objects.filter(campaign_id=campaign_id)
            .exclude(**{f"{name}_on": ""})
            .values_list(f"{name}_on")
            .annotate(n=Count("id"))
            .order_by()
        )
        for code, n in answers:
            stats[answer_split(code)][name] = n
    return dict(stats)


def stats_check(*, campaign_id, repair: bool = False) -> dict[str, tuple[int, int]]:
    """Compare a campaign's kept stats with a recount: {name: (kept, counted)} for each
    that differs (a step variant's as "2B sent"). With `repair`, the kept rows take the
    recount (in shard 0, the other shards zero). Exact beside writers: the campaign's rows
    are locked before the recount, every shard of the campaign's and of its kept step
    variants' made to exist first, so a change still in flight (its stats write waits on
    the lock) is not in the recount and adds itself after."""
    with transaction.atomic():
        _shards_lock(campaign_id)
        kept = stats_read(campaign_ids=[campaign_id])[campaign_id]
        actual = stats_recount(campaign_ids=[campaign_id])[campaign_id]
        drift = {
            name: (kept[name], actual[name]) for name in STAT_NAMES if kept[name] != actual[name]
        }
        kept_variants = variant_stats_read(campaign_id=campaign_id)
        actual_variants = variant_stats_recount(campaign_id=campaign_id)
        zero = dict.fromkeys(VARIANT_STAT_NAMES, 0)
        for key in sorted(set(kept_variants) | set(actual_variants)):
            had, has = kept_variants.get(key, zero), actual_variants.get(key, zero)
            for name in VARIANT_STAT_NAMES:
                if had[name] != has[name]:
                    drift[f"{key[0]}{key[1]} {name}"] = (had[name], has[name])
        drift.update(_branches_check(campaign_id, repair=repair))
        if repair and drift:
            zeros = dict.fromkeys(STAT_NAMES, 0)
            CampaignStats.objects.filter(campaign_id=campaign_id).update(**zeros)
            CampaignStats.objects.filter(campaign_id=campaign_id, shard=0).update(**actual)
            StepVariantStats.objects.filter(campaign_id=campaign_id).update(**zero)
            for (step, variant), counts in actual_variants.items():
                StepVariantStats.objects.update_or_create(
                    campaign_id=campaign_id, step=step, variant=variant, shard=0, defaults=counts
                )
            StepVariantStats.objects.filter(campaign_id=campaign_id).exclude(
                pk__in=[
                    row.pk
                    for row in StepVariantStats.objects.filter(campaign_id=campaign_id)
                    if (row.step, row.variant) in actual_variants
                ]
            ).delete()
    return drift


def _shards_lock(campaign_id) -> None:
    """Make every shard of the campaign's stats and of its kept step variants exist, and
    lock all their rows: a writer adds only to a row that exists (an UPDATE, which waits
    for the lock) or inserts one (which cannot happen while every shard exists). The
    campaign's rows first, then its variants': the writers' order (a first step's record
    holds its campaign shard when it reaches its variant's)."""
    shards = list(range(shard_count()))
    CampaignStats.objects.bulk_create(
        [CampaignStats(campaign_id=campaign_id, shard=shard) for shard in shards],
        ignore_conflicts=True,
    )
    list(
        CampaignStats.objects.select_for_update().filter(campaign_id=campaign_id).order_by("shard")
    )
    variants = set(
        StepVariantStats.objects.filter(campaign_id=campaign_id).values_list("step", "variant")
    )
    StepVariantStats.objects.bulk_create(
        [
            StepVariantStats(campaign_id=campaign_id, step=step, variant=variant, shard=shard)
            for step, variant in sorted(variants)
            for shard in shards
        ],
        ignore_conflicts=True,
    )
    list(
        StepVariantStats.objects.select_for_update()
        .filter(campaign_id=campaign_id)
        .order_by("step", "variant", "shard")
    )


def branch_stats_recount(*, campaign_id) -> dict[str, dict[str, int]]:
    """A campaign's branch decisions counted from their kept rows (BranchDecision):
    {key: {then_count, else_count}}."""
    counts: defaultdict[str, dict[str, int]] = defaultdict(
        lambda: {"then_count": 0, "else_count": 0}
    )
    decisions = (
        BranchDecision.objects.filter(enrollment__campaign_id=campaign_id)
        .values_list("key", "outcome")
        .annotate(n=Count("id"))
        .order_by()
    )
    for key, outcome, n in decisions:
        counts[key][f"{outcome}_count"] = n
    return dict(counts)


def _branches_check(campaign_id, *, repair: bool) -> dict[str, tuple[int, int]]:
    """stats_check's part for the branches' counts (BranchStats), after the campaign's and
    its variants' rows are locked: every shard of each branch made to exist and locked
    (a decision adds to a row that exists, or inserts one, which cannot happen then), the
    kept sums compared with the recount, and with `repair` set to it (in shard 0)."""
    steps = CampaignStep.objects.filter(campaign_id=campaign_id, branch__isnull=False)
    decided = BranchDecision.objects.filter(enrollment__campaign_id=campaign_id)
    keys = set(steps.values_list("key", flat=True))
    keys |= set(BranchStats.objects.filter(campaign_id=campaign_id).values_list("key", flat=True))
    keys |= set(decided.order_by().values_list("key", flat=True).distinct())
    if not keys:
        return {}
    BranchStats.objects.bulk_create(
        [
            BranchStats(campaign_id=campaign_id, key=key, shard=shard)
            for key in sorted(keys)
            for shard in range(shard_count())
        ],
        ignore_conflicts=True,
    )
    zero = {"then_count": 0, "else_count": 0}
    kept: defaultdict[str, dict[str, int]] = defaultdict(lambda: dict(zero))
    # Locked in (key, shard) order, the order decisions write them in.
    rows = BranchStats.objects.select_for_update().filter(campaign_id=campaign_id)
    for row in rows.order_by("key", "shard"):
        kept[row.key]["then_count"] += row.then_count
        kept[row.key]["else_count"] += row.else_count
    actual = branch_stats_recount(campaign_id=campaign_id)
    drift = {
        f"branch {key} {name}": (kept[key][name], actual.get(key, zero)[name])
        for key in sorted(keys)
        for name in zero
        if kept[key][name] != actual.get(key, zero)[name]
    }
    if repair and drift:
        BranchStats.objects.filter(campaign_id=campaign_id).update(**zero)
        for key, counts in actual.items():
            BranchStats.objects.filter(campaign_id=campaign_id, key=key, shard=0).update(**counts)
    return drift
