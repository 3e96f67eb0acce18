"""A campaign's stats, kept on write: every enrollment change that moves a count says so
here, in its own transaction, and a campaign's stats are a few rows read (CampaignStats)
however many enrollments it has: a count's shards (config/db/counters.py), up to
COUNTER_SHARDS rows per campaign and per step variant, each write adding to one drawn
at random, each read summing them.

The counts (STAT_NAMES): enrolled (enrollments), sent (enrollments with a step sent),
opened, clicked, replied, bounced, unsubscribed (enrollments where that happened): the same
definitions as a count over the enrollments table, which `stats_check` recomputes;
and stopped (enrollments ended by a rule or by hand, even if a bounce came after).

The transitions (outreach.enrollments.transitions) call `count(campaign_id, sent=1)`
after the enrollment UPDATE that made the change, and only when that UPDATE matched
its row, so a change counts once however many workers race for it. The record of a sent
message does the same in SQL (outreach.sending.record_sql, with STATS_SENT_CTE below).

Lock order: the counter rows come last in a transaction, after the rows it changes (the
claim, the enrollment, the contact, the mailbox), and every writer takes them in this one
order, so no two transactions wait on each other's counter rows:

1. the branches' counts (BranchStats, outreach.enrollments.branching.branch_counts_write:
   a decision is recorded before what follows it is counted);
2. the mailbox's row of the campaign (CredentialCampaignStats: a send, a bounce);
3. the period's usage (billing: a send, a response);
4. the campaigns' stats (CampaignStats), in campaign id order;
5. each campaign's step variants (StepVariantStats), after its campaign's row;
6. the hour's analytics rows (AnalyticsHour, outreach.analytics), last of all.

`counting()` gathers a transaction's counts and writes them when its block ends (inside
the transaction), 4 and 5, then its analytics hits (6): a transition that changes
several enrollments (an unsubscribe in every campaign, a deleted contact) cannot hold one
stats row while it waits for an enrollment row that a sender holds while waiting for that
stats row. The one statement of a send's record (outreach.sending.record_sql) and of a
first open (outreach.enrollments.opens) keep the same order through their CTEs'
conditions (an open's message is counted in the hour's analytics by its read, a
statement of its own committed before); a click counts its message's analytics through
`hits_add`, so its row comes after the click's stats. tests/outreach/test_campaign_stats.py
runs them all at once.
"""

import threading
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any
from uuid import UUID

from django.db import connection
from django.db.models import Sum

from config.db.counters import counter_shard
from outreach.analytics import deferred
from outreach.models.campaigns import CampaignStats, StepVariantStats
from outreach.models.sending import Enrollment

STAT_NAMES = (
    "enrolled",
    "sent",
    "opened",
    "clicked",
    "replied",
    "bounced",
    "unsubscribed",
    "stopped",
)
# Per step and A/B variant (StepVariantStats): messages sent, and the opens, first clicks,
# replies and bounces that answered them (Enrollment.opened_on, clicked_on, replied_on,
# bounced_on).
VARIANT_STAT_NAMES = ("sent", "opened", "clicked", "replied", "bounced")
ANSWERS = ("opened", "clicked", "replied", "bounced")


def stats_ctes(name: str, *, when: str) -> str:
    """CTEs `cstats_add` and `cstats`: 1 added to the campaign's `name` count (the
    parameters `campaign` and `shard`, the shard's row: counter_shard()) when the SQL
    condition `when` holds: the row updated, and inserted (an upsert) only when the update
    found none. An upsert that finds the row locks it first, a WAL record of its own each
    time (bench/README.md, "WAL per send"), where an UPDATE writes only the new version."""
    return f"""
cstats_add AS (
    UPDATE outreach_campaignstats AS s SET {name} = s.{name} + 1
    WHERE s.campaign_id = %(campaign)s AND s.shard = %(shard)s AND {when}
    RETURNING 1
),
cstats AS (
    INSERT INTO outreach_campaignstats AS s (campaign_id, shard, {name})
    SELECT %(campaign)s, %(shard)s, 1
    WHERE {when}
        AND NOT EXISTS (SELECT FROM cstats_add)
    ON CONFLICT (campaign_id, shard) DO UPDATE SET {name} = s.{name} + excluded.{name}
    RETURNING 1
),"""  # noqa: S608 - a column of STAT_NAMES and the code's own condition


def variant_ctes(name: str, *, when: str) -> str:
    """CTEs `vstats_add` and `vstats`: 1 added to one step variant's `name` count (the
    parameters `campaign`, `step`, `variant`, `shard`) when `when` holds, as stats_ctes does.
    Count the campaign's row first (the lock order): make `when` wait for `cstats`."""
    return f"""
vstats_add AS (
    UPDATE outreach_stepvariantstats AS v SET {name} = v.{name} + 1
    WHERE v.campaign_id = %(campaign)s AND v.step = %(step)s AND v.variant = %(variant)s
        AND v.shard = %(shard)s AND {when}
    RETURNING 1
),
vstats AS (
    INSERT INTO outreach_stepvariantstats AS v (campaign_id, step, variant, shard, {name})
    SELECT %(campaign)s, %(step)s, %(variant)s, %(shard)s, 1
    WHERE {when}
        AND NOT EXISTS (SELECT FROM vstats_add)
    ON CONFLICT (campaign_id, step, variant, shard)
        DO UPDATE SET {name} = v.{name} + excluded.{name}
    RETURNING 1
),"""  # noqa: S608 - a column of VARIANT_STAT_NAMES and the code's own condition


# The record of a sent message (outreach.sending.record_sql) counts its first step in its own
# statement. It runs after the statement's other locking writes (see the module's lock
# order): `after` names CTEs of that statement to finish first.
STATS_SENT_CTE = stats_ctes("sent", when="%(first)s AND EXISTS (SELECT FROM moved) AND {after}")
# The message's step and variant, counted after the campaign's row (the lock order).
VARIANT_SENT_CTE = variant_ctes(
    "sent", when="EXISTS (SELECT FROM msg) AND (SELECT count(*) FROM cstats) >= 0"
)


def _add(model, keys: dict, names: tuple[str, ...], deltas: dict[str, int]) -> None:
    """Add `deltas` to the counters of one shard of the `model` row with these `keys`,
    making the row when it does not exist yet: one INSERT ... ON CONFLICT DO UPDATE."""
    names = tuple(name for name in names if deltas.get(name))
    if not names:
        return
    keys = {**keys, "shard": counter_shard()}
    columns = ", ".join([*keys, *names])
    placeholders = ", ".join(["%s"] * (len(keys) + len(names)))
    updates = ", ".join(f"{name} = t.{name} + excluded.{name}" for name in names)
    campaign = model._meta.get_field("campaign")
    values = [
        campaign.get_db_prep_value(value, connection) if key == "campaign_id" else value
        for key, value in keys.items()
    ]
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {model._meta.db_table} AS t ({columns}) VALUES ({placeholders})"  # noqa: S608
            f" ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {updates}",
            [*values, *(deltas[name] for name in names)],
        )


def _write(campaign_id, deltas: dict[str, int]) -> None:
    _add(CampaignStats, {"campaign_id": campaign_id}, STAT_NAMES, deltas)


def _write_variant(campaign_id, step: int, variant: str, deltas: dict[str, int]) -> None:
    keys = {"campaign_id": campaign_id, "step": step, "variant": variant}
    _add(StepVariantStats, keys, VARIANT_STAT_NAMES, deltas)


class _Tally:
    def __init__(self) -> None:
        self.deltas: defaultdict[UUID, Counter] = defaultdict(Counter)
        self.variants: defaultdict[tuple[UUID, int, str], Counter] = defaultdict(Counter)

    def flush(self) -> None:
        if not (self.deltas or self.variants):
            return
        if connection.in_atomic_block:
            # The transaction's foreign keys checked now, not at commit: at commit, after
            # the stats rows, a check's key-share lock could wait on a row whose holder
            # waits on these stats.
            with connection.cursor() as cursor:
                cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        # Campaign by campaign: its row, then its variants' rows, in one order everywhere.
        campaigns = {key[0] for key in self.variants} | set(self.deltas)
        for campaign_id in sorted(campaigns, key=str):
            if campaign_id in self.deltas:
                _write(campaign_id, self.deltas[campaign_id])
            for key in sorted(k for k in self.variants if k[0] == campaign_id):
                _, step, letter = key
                _write_variant(campaign_id, step, letter, self.variants[key])
        self.deltas.clear()
        self.variants.clear()


_local = threading.local()


@contextmanager
def counting() -> Iterator[None]:
    """Gather the counts of the block and write them when it ends, in campaign order,
    and then the analytics hits of the block (outreach.analytics.deferred).
    Use it inside the transaction (`with transaction.atomic(), counting():`). Nested
    blocks write with the outermost one."""
    if getattr(_local, "tally", None) is not None:
        yield
        return
    tally = _local.tally = _Tally()
    try:
        # The hour's analytics counters (outreach.analytics) after the stats rows: last.
        with deferred():
            yield
            tally.flush()
    finally:
        _local.tally = None


def count(campaign_id, **deltas: int) -> None:
    """Add to a campaign's counts: at the end of the enclosing `counting()` block, or now."""
    unknown = set(deltas) - set(STAT_NAMES)
    if unknown:
        raise ValueError(f"not a campaign stat: {', '.join(sorted(unknown))}")
    tally = getattr(_local, "tally", None)
    if tally is None:
        _write(campaign_id, deltas)
    else:
        tally.deltas[campaign_id].update(deltas)


def variant_count(campaign_id, step: int, variant: str, **deltas: int) -> None:
    """Add to one step variant's counts: at the end of the enclosing `counting()`, or now."""
    unknown = set(deltas) - set(VARIANT_STAT_NAMES)
    if unknown:
        raise ValueError(f"not a variant stat: {', '.join(sorted(unknown))}")
    tally = getattr(_local, "tally", None)
    if tally is None:
        _write_variant(campaign_id, step, variant, deltas)
    else:
        tally.variants[(campaign_id, step, variant)].update(deltas)


def answered(enrollment: Enrollment) -> str:
    """The step and variant ("2B") an open, reply or bounce of the enrollment answers
    now: its last step sent, by position (`last_step`; a row from before it was kept:
    `current_step`, the same in a sequence without branches), "" before any."""
    if not enrollment.current_step:
        return ""
    position = answered_position(enrollment)
    letter = (enrollment.variants or {}).get(str(position), "A")
    return f"{position}{letter}"


def answered_position(enrollment: Enrollment) -> int:
    """The position of the enrollment's last step sent (see `answered`)."""
    return enrollment.last_step or enrollment.current_step


def answer_split(code: str) -> tuple[int, str]:
    """A step and variant code ("2B") as (2, "B")."""
    return int(code[:-1]), code[-1]


def answer_count(enrollment: Enrollment, name: str) -> None:
    """Record what the enrollment's first open, reply or bounce (`name`) answered, on
    the enrollment and in its campaign's stats (the campaign count and the variant's).
    Call it in the transaction that set the enrollment's `<name>_at`, holding its row."""
    code = answered(enrollment)
    count(enrollment.campaign_id, **{name: 1})
    if code:
        Enrollment.objects.filter(pk=enrollment.pk).update(**{f"{name}_on": code})
        setattr(enrollment, f"{name}_on", code)
        step, letter = answer_split(code)
        variant_count(enrollment.campaign_id, step, letter, **{name: 1})


def counted(enrollment: Enrollment) -> dict[str, int]:
    """The counts one enrollment contributes to its campaign's stats."""
    return {
        "enrolled": 1,
        "sent": int(enrollment.sent_at is not None),
        "opened": int(enrollment.opened_at is not None),
        "clicked": int(enrollment.clicked_at is not None),
        "replied": int(enrollment.replied_at is not None),
        "bounced": int(enrollment.bounced_at is not None),
        "unsubscribed": int(enrollment.unsubscribed_at is not None),
        "stopped": int(enrollment.stopped_at is not None),
    }


def stats_read(*, campaign_ids: Iterable[UUID]) -> dict[UUID, dict[str, int]]:
    """The stats of these campaigns, one query for any number (zeros before any count):
    each campaign's shards summed."""
    ids = list(campaign_ids)
    stats = {campaign_id: dict.fromkeys(STAT_NAMES, 0) for campaign_id in ids}
    if ids:
        rows = (
            CampaignStats.objects.filter(campaign_id__in=ids)
            .values("campaign_id")
            .annotate(**{f"{name}_sum": Sum(name) for name in STAT_NAMES})
            .order_by()
        )
        for row in rows:
            counts: dict[str, Any] = dict(row)  # one key per annotation, named at run time
            stats[counts["campaign_id"]] = {name: counts[f"{name}_sum"] for name in STAT_NAMES}
    return stats


def variant_stats_read(*, campaign_id) -> dict[tuple[int, str], dict[str, int]]:
    """The kept counts of a campaign's step variants, each variant's shards summed:
    {(step, variant): {sent, ...}}."""
    rows = (
        StepVariantStats.objects.filter(campaign_id=campaign_id)
        .values("step", "variant")
        .annotate(**{f"{name}_sum": Sum(name) for name in VARIANT_STAT_NAMES})
        .order_by()
    )
    kept = {}
    for row in rows:
        counts: dict[str, Any] = dict(row)  # one key per annotation, named at run time
        key = (counts["step"], counts["variant"])
        kept[key] = {name: counts[f"{name}_sum"] for name in VARIANT_STAT_NAMES}
    return kept
