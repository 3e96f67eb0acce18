"""The scheduler's new threads per campaign (outreach.sending.scheduler._NEW_THREADS_SQL):
the due enrollments without a mailbox yet, by campaign and next_send_at, so that a run
reads each campaign's first few rather than every due row of the fleet (bench/README.md,
"The fleet at platform size"). A send gives the row its mailbox: the record's move writes
no entry here.

Safe on a live database: built CONCURRENTLY (the migration is not atomic)."""

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("outreach", "0041_analytics_days"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="enrollment",
            index=models.Index(
                condition=models.Q(
                    ("credential__isnull", True), ("status__in", ["scheduled", "sent"])
                ),
                fields=["campaign", "next_send_at"],
                name="enrollment_new_thread_idx",
            ),
        ),
    ]
