"""The scheduler's sweep of suppressed contacts reads what was suppressed since its last
look, not every due enrollment (outreach.sending.recovery.suppressed_end; bench/README.md,
"The sweep of suppressed contacts"): the suppressed contacts by the time their row was
last written (a partial index: only suppressed rows have an entry), how far the sweep
has looked, and the suppressed contacts it still watches.

No rows are written here: with no mark, the sweep's first run looks at every suppressed
contact once. Safe on a live database: the index is built CONCURRENTLY (the migration is
not atomic)."""

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("outreach", "0042_enrollment_new_thread_idx"),
    ]

    operations = [
        migrations.CreateModel(
            name="SuppressedWatch",
            fields=[
                ("contact_id", models.UUIDField(primary_key=True, serialize=False)),
                ("since", models.DateTimeField()),
            ],
        ),
        migrations.CreateModel(
            name="SweepMark",
            fields=[
                ("name", models.CharField(max_length=40, primary_key=True, serialize=False)),
                ("at", models.DateTimeField()),
            ],
        ),
        AddIndexConcurrently(
            model_name="contact",
            index=models.Index(
                condition=models.Q(
                    ("unsubscribed_at__isnull", False),
                    ("bounced_at__isnull", False),
                    _connector="OR",
                ),
                fields=["updated_at"],
                name="contact_suppressed_written_idx",
            ),
        ),
    ]
