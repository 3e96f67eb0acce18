"""A usage record's count moves to shards (billing.models.UsageCount, config/db/counters.py):
up to COUNTER_SHARDS rows per record, summed on read, so that the sends of one account
stop queueing on the record's row lock.

Each record's count is copied into its shard 0 (records with no sends get no row), then
the column goes. The copy locks out the writers of the column first: an increment
committed between the copy's snapshot and the column's drop would be lost. Going back
puts each record's sum in the column again."""

import django.db.models.deletion
from django.db import migrations, models

COPY_FORWARD = """
LOCK TABLE billing_usagerecord IN SHARE MODE;
INSERT INTO billing_usagecount (record_id, shard, sends)
SELECT id, 0, sends_count FROM billing_usagerecord WHERE sends_count > 0;
"""

COPY_REVERSE = """
UPDATE billing_usagerecord AS r SET sends_count = c.total
FROM (SELECT record_id, sum(sends) AS total FROM billing_usagecount GROUP BY record_id) AS c
WHERE c.record_id = r.id;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("billing", "0003_checkout_session"),
    ]

    operations = [
        migrations.CreateModel(
            name="UsageCount",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("shard", models.PositiveSmallIntegerField()),
                ("sends", models.PositiveIntegerField(default=0)),
                (
                    "record",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="counts",
                        to="billing.usagerecord",
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=("record", "shard"), name="usage_count_record_shard"
                    )
                ],
            },
        ),
        migrations.RunSQL(COPY_FORWARD, COPY_REVERSE),
        migrations.RemoveField(
            model_name="usagerecord",
            name="sends_count",
        ),
        migrations.AlterModelOptions(
            name="usagerecord",
            options={"base_manager_name": "objects", "ordering": ["-period_start"]},
        ),
    ]
