"""One index entry fewer per send (bench/README.md, "WAL per send, the next kilobyte"):
the open claims' index by batch goes. The sender's load of a task's batches finds them
among the open claims, few (at most a batch per mailbox) and read whole through the
partial unique index of open claims, as the recovery and the busy mailboxes already
read them.

Safe on a live database: dropped CONCURRENTLY (the migration is not atomic)."""

from django.contrib.postgres.operations import RemoveIndexConcurrently
from django.db import migrations


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("outreach", "0026_room_for_hot_updates"),
    ]

    operations = [
        RemoveIndexConcurrently(model_name="sendclaim", name="sendclaim_batch_idx"),
    ]
