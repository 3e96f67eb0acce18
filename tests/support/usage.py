"""A period's usage set to a count, as a test's starting point (a plan limit reached, or
one send short of it): the record's count is kept in shards (billing.models.UsageCount),
so it is set as one shard holding the whole count."""

from billing.models import UsageCount, UsageRecord


def usage_set(record: UsageRecord, sends: int) -> None:
    """Make `record`'s count `sends`: its shards replaced by shard 0 alone."""
    UsageCount.objects.filter(record=record).delete()
    UsageCount.objects.create(record=record, shard=0, sends=sends)
