"""Every foreign key has an index that leads with its column: PostgreSQL checks the
key when a referenced row is deleted (Django's constraints are deferred: at the
deleting transaction's commit), and without that index the check is a scan of the
whole referencing table for each row deleted. Dropping such an index to save the WAL
a send writes made a 3,000-mailbox deletion's commit take 185 s (bench/README.md,
"Steps 2 and 4 taken back")."""

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db

# Keys whose index was dropped on purpose: what deletes the referenced row is rare, and
# pays one scan. (table, column): why.
WITHOUT_INDEX = {
    # An account's deletion (one at a time, by staff or the account's owner): one scan
    # of the messages at its commit, against an index entry written by every send.
    ("outreach_message", "account_id"): "an account's deletion",
    # The same for the outbox: an entry per event written, one scan per account deleted.
    ("webhooks_event", "account_id"): "an account's deletion",
}

_UNINDEXED = """
SELECT c.conrelid::regclass::text, a.attname
FROM pg_constraint AS c
JOIN pg_attribute AS a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
JOIN pg_namespace AS n ON n.oid = c.connamespace
WHERE c.contype = 'f' AND array_length(c.conkey, 1) = 1 AND n.nspname = current_schema()
  AND NOT EXISTS (
      SELECT FROM pg_index AS i
      WHERE i.indrelid = c.conrelid AND i.indkey[0] = c.conkey[1] AND i.indpred IS NULL)
"""


def test_every_foreign_key_has_an_index_leading_with_its_column():
    with connection.cursor() as cursor:
        cursor.execute(_UNINDEXED)
        unindexed = set(cursor.fetchall())
    assert unindexed == set(WITHOUT_INDEX)
