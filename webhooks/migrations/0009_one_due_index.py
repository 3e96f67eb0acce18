"""One index entry fewer per job (a job per send and webhook; bench/README.md, "WAL
per send, the next kilobyte"): the jobs' due index by next_attempt_at alone goes. The
sweep probes each webhook's due jobs through the drain's index (webhook,
next_attempt_at), and the metrics read the active jobs through it.

Safe on a live database: the index is dropped CONCURRENTLY (the migration is not
atomic)."""

from django.contrib.postgres.operations import RemoveIndexConcurrently
from django.db import migrations


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("webhooks", "0008_drain_ring"),
    ]

    operations = [
        RemoveIndexConcurrently(model_name="deliveryjob", name="deliveryjob_due_idx"),
    ]
