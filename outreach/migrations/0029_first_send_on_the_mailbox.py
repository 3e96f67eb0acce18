"""One index entry fewer per send (bench/README.md, "WAL per send, the next kilobyte"):
the message's index by mailbox goes. It served a mailbox's first send (the first IMAP
poll looks at what arrived since) and the SET NULL of a deleted mailbox: the first send
is now kept on the mailbox (`first_sent_at`, set by the record of a sent message, filled
here from the messages), and a deleted mailbox's messages are found through its
account's enrollments (outreach.models.mailbox_unlink.mailbox_references_clear).

Safe on a live database: the column is added without a default (no rewrite), filled by
one UPDATE of the mailboxes (a scan of the messages), and the index dropped
CONCURRENTLY afterwards (the migration is not atomic). A mailbox whose first message is
recorded by an older release's worker after the fill has no first_sent_at until its
next send; its first poll starts at the newest message of its inbox, as for a mailbox
that has sent nothing."""

import django.db.models.deletion
from django.db import migrations, models

FILL = """
UPDATE outreach_smtpcredential AS c SET first_sent_at = m.first
FROM (
    SELECT credential_id, min(sent_at) AS first FROM outreach_message
    WHERE credential_id IS NOT NULL GROUP BY credential_id
) AS m
WHERE c.id = m.credential_id AND c.first_sent_at IS NULL
"""


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("outreach", "0028_claims_without_batch_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="smtpcredential",
            name="first_sent_at",
            field=models.DateTimeField(blank=True, editable=False, null=True),
        ),
        migrations.RunSQL(FILL, migrations.RunSQL.noop),
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    'DROP INDEX CONCURRENTLY IF EXISTS "outreach_message_credential_id_7ff89ee7"',
                    "CREATE INDEX CONCURRENTLY IF NOT EXISTS "
                    '"outreach_message_credential_id_7ff89ee7" '
                    'ON "outreach_message" ("credential_id")',
                )
            ],
            state_operations=[
                migrations.AlterField(
                    model_name="message",
                    name="credential",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="messages",
                        to="outreach.smtpcredential",
                    ),
                )
            ],
        ),
    ]
