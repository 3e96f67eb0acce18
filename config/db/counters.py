"""Counter rows that many writers add to at once, split into shards.

A count that every send of an account or campaign adds to (the period's usage, a
campaign's stats, a step variant's) is kept as up to COUNTER_SHARDS rows per key, each
a part of the count, and read as their sum. A writer adds to one shard, drawn at random
per statement, so concurrent sends of one campaign wait for each other's row lock only
when they draw the same shard: with one row per key, each send held the row from its
update to its commit, and one campaign's sends went through it one at a time (about
200-290 a second on the 2-core benchmark machine, bench/README.md "Counter rows in
shards").

A reader sums a key's rows, whatever their number: lowering COUNTER_SHARDS leaves the
higher shards counted, raising it spreads new writes wider. A check that must hold the
whole count still (a recount) makes the shards 0..COUNTER_SHARDS-1 exist and locks every
row of the key, so no writer can add to one it did not lock.
"""

import random

from django.conf import settings


def counter_shard() -> int:
    """The shard a write adds to: one of 0..COUNTER_SHARDS-1, at random."""
    return random.randrange(shard_count())  # noqa: S311 - spreading locks, not a secret


def shard_count() -> int:
    return max(1, int(settings.COUNTER_SHARDS))
