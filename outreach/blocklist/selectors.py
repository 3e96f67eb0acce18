"""Reads of the blocklist: an account's entries, and which addresses it blocks."""

from collections.abc import Iterable
from typing import Any
from uuid import UUID

from django.db import connection
from django.db.models import QuerySet

from outreach.blocklist.entries import InvalidEntry, address_keys, entry_clean
from outreach.models.blocklist import BlocklistEntry
from outreach.models.contacts import Contact
from outreach.models.sending import Enrollment


def entries_filter(
    entries: QuerySet, *, kind: str | None = None, value: str | None = None
) -> QuerySet:
    """Entries (an account's, as the API's scoped base gives them) of `kind`, or for
    `value`, compared in its normal form (an entry given in another case or as a
    Unicode domain finds the stored one)."""
    if kind:
        entries = entries.filter(kind=kind)
    if value is not None:
        try:
            normal, _ = entry_clean(value)
        except InvalidEntry:
            return entries.none()
        entries = entries.filter(value=normal)
    return entries


def blocked_addresses(pairs: Iterable[tuple[UUID, str]]) -> dict[tuple[UUID, str], str]:
    """The blocked ones among (account id, lower-cased address) pairs, each with the entry
    value that blocks it (its own address before its nearest domain). One query, on the
    (account, value) index, whatever the number of entries."""
    wanted: dict[tuple[UUID, str], list[str]] = {}
    for account_id, email_lower in pairs:
        wanted.setdefault((account_id, email_lower), address_keys(email_lower))
    if not wanted:
        return {}
    accounts = {account_id for account_id, _ in wanted}
    keys = {key for candidates in wanted.values() for key in candidates}
    found = set(
        BlocklistEntry.objects.filter(account_id__in=accounts, value__in=keys).values_list(
            "account_id", "value"
        )
    )
    if not found:
        return {}
    blocked = {}
    for (account_id, email_lower), candidates in wanted.items():
        for key in candidates:
            if (account_id, key) in found:
                blocked[account_id, email_lower] = key
                break
    return blocked


def blocked_among(*, account_id: UUID, emails: Iterable[str]) -> dict[str, str]:
    """The blocked ones among one account's lower-cased addresses, each with its entry."""
    return {
        email: entry
        for (_, email), entry in blocked_addresses((account_id, e) for e in emails).items()
    }


# The entry values that block a contact, in SQL: its address, its domain and each parent
# domain of at least two labels (as address_keys does), compared on the (account, value)
# index.
_CONTACT_KEYS_SQL = """
    array_append(ARRAY(
        SELECT array_to_string(labels[i:], '.')
        FROM (SELECT string_to_array(substring(c.email_lower FROM '@([^@]*)$'), '.') AS labels) d,
             generate_subscripts(d.labels, 1) AS i
        WHERE i < array_length(d.labels, 1)
    ), c.email_lower)
"""


def blocked_pending_ids(*, campaign_id: UUID, account_id: UUID, contact_ids=None) -> list[UUID]:
    """The campaign's pending enrollments (of `contact_ids` when given) whose contact the
    account's blocklist names. Nothing is read when the account has no entry."""
    if not BlocklistEntry.objects.filter(account_id=account_id).exists():
        return []
    enrollment = Enrollment._meta.db_table
    contact = Contact._meta.db_table
    entry = BlocklistEntry._meta.db_table
    only_contacts = "AND e.contact_id = ANY(%(contacts)s)" if contact_ids is not None else ""
    sql = f"""
        SELECT e.id FROM {enrollment} e JOIN {contact} c ON c.id = e.contact_id
        WHERE e.campaign_id = %(campaign)s AND e.status = %(pending)s {only_contacts}
          AND EXISTS (
            SELECT 1 FROM {entry} b
            WHERE b.account_id = %(account)s AND b.value = ANY({_CONTACT_KEYS_SQL})
          )
    """  # noqa: S608 - table names from the models; every value is a parameter
    params: dict[str, Any] = {
        "campaign": campaign_id,
        "account": account_id,
        "pending": Enrollment.Status.PENDING,
        "contacts": list(contact_ids or []),
    }
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [row[0] for row in cursor.fetchall()]
