"""Writes of the blocklist: entries added in bulk, one deleted."""

from django.db import transaction

from outreach.blocklist.entries import InvalidEntry, entry_clean
from outreach.models.blocklist import BlocklistEntry

# Entries one POST /blocklist may carry.
ENTRIES_MAX = 10_000


def blocklist_add(*, account, values: list, reason: str = "") -> dict:
    """Add entries (addresses or domains): returns `{added, existing, invalid}`, where
    `existing` counts the values already on the list (or given twice) and `invalid` lists
    `{value, message}` for the values refused. One INSERT ... ON CONFLICT DO NOTHING per
    2,000 entries: two calls racing add each entry once."""
    cleaned: dict[str, str] = {}
    invalid = []
    repeated = 0
    for raw in values:
        try:
            value, kind = entry_clean(raw)
        except InvalidEntry as exc:
            invalid.append(
                {"value": raw if isinstance(raw, str) else repr(raw), "message": str(exc)}
            )
            continue
        if value in cleaned:
            repeated += 1
        cleaned[value] = kind
    rows = [
        BlocklistEntry(account=account, value=value, kind=kind, reason=reason)
        for value, kind in cleaned.items()
    ]
    added = 0
    if rows:
        with transaction.atomic():
            BlocklistEntry.objects.bulk_create(rows, ignore_conflicts=True, batch_size=2000)
            # The ids are made here: the rows under them are the ones this call inserted.
            added = BlocklistEntry.objects.filter(pk__in=[row.pk for row in rows]).count()
    return {"added": added, "existing": len(rows) - added + repeated, "invalid": invalid}


def blocklist_entry_delete(*, entry: BlocklistEntry) -> None:
    """Take an entry off the list. Enrollments it stopped stay stopped."""
    BlocklistEntry.objects.filter(pk=entry.pk).delete()
