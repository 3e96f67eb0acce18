"""Two index entries fewer per send (bench/README.md, "WAL per send, the next
kilobyte"), both of the mailbox's:

- the enrollment's index by mailbox goes: it served only the SET NULL of a deleted
  mailbox, and the record moves the enrollment at every send (not a HOT update: an
  entry in every index). A mailbox's deletion now finds its threads through the
  account's campaigns (SmtpCredential.delete, outreach.models.mailbox_unlink); the
  foreign key stays (on_delete is Django's only);
- the claims' index by mailbox keeps the finished ones only (the admin's latest
  attempts, the deletion's SET NULL): a claim wrote an entry at its insert and another
  at its finish, now one at the finish.

Safe on a live database: the new index is built CONCURRENTLY before the old ones are
dropped CONCURRENTLY (the migration is not atomic); the foreign key is not touched."""

import django.db.models.deletion
from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("outreach", "0026_room_for_hot_updates"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="sendclaim",
            index=models.Index(
                condition=models.Q(("finished_at__isnull", False)),
                fields=["credential", "claimed_at"],
                name="sendclaim_credential_done_idx",
            ),
        ),
        RemoveIndexConcurrently(model_name="sendclaim", name="sendclaim_credential_idx"),
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    'DROP INDEX CONCURRENTLY IF EXISTS "outreach_enrollment_credential_id_f00d2043"',
                    "CREATE INDEX CONCURRENTLY IF NOT EXISTS "
                    '"outreach_enrollment_credential_id_f00d2043" '
                    'ON "outreach_enrollment" ("credential_id")',
                )
            ],
            state_operations=[
                migrations.AlterField(
                    model_name="enrollment",
                    name="credential",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="enrollments",
                        to="outreach.smtpcredential",
                    ),
                )
            ],
        ),
        migrations.AlterField(
            model_name="sendclaim",
            name="credential",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.DO_NOTHING,
                related_name="+",
                to="outreach.smtpcredential",
            ),
        ),
    ]
