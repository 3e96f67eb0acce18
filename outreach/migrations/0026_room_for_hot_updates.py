"""Room on each page for the rows a send updates (bench/README.md, "WAL per send").

An update whose new version fits on the row's page and changes no indexed column is a
HOT update: no index entry, and only the changed bytes are logged. Without room, the
new version goes to another page: a lock record for the old one, the whole new row,
and an entry in every index.

- A mailbox's row is updated twice a send (the claim's reservation, the record's count)
  and has no indexed column among them: a fillfactor of 20 leaves room for those
  versions between prunes. The table has a row per mailbox: a few MB at most.
- A claim's row is inserted, marked started with its message (growing by the text),
  then finished; a fillfactor of 50 keeps both new versions on the page (the mark a HOT
  update). Rows only ever join the end of the table: without room, every mark and
  finish left its page.

Only rows written from now on are placed by it; VACUUM FULL (or pg_repack) of the two
tables applies it to the rows already there."""

from django.db import migrations

FORWARD = """
ALTER TABLE outreach_smtpcredential SET (fillfactor = 20);
ALTER TABLE outreach_sendclaim SET (fillfactor = 50);
"""
REVERSE = """
ALTER TABLE outreach_smtpcredential RESET (fillfactor);
ALTER TABLE outreach_sendclaim RESET (fillfactor);
"""


class Migration(migrations.Migration):
    dependencies = [
        ("outreach", "0025_indexes_written_per_send"),
    ]

    operations = [migrations.RunSQL(FORWARD, REVERSE)]
