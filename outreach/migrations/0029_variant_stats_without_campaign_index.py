"""StepVariantStats's index by campaign goes: its unique constraint (campaign, step,
variant, shard) leads with the campaign and serves the same reads and the foreign key's
checks. Only the index is dropped; Django's AlterField would also drop and re-add (and
re-validate) the foreign key."""

import django.db.models.deletion
from django.db import migrations, models

INDEX = "outreach_stepvariantstats_campaign_id_3176db10"


class Migration(migrations.Migration):
    dependencies = [
        ("outreach", "0028_stats_in_shards"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="stepvariantstats",
                    name="campaign",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="outreach.campaign",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    f'DROP INDEX IF EXISTS "{INDEX}"',
                    f'CREATE INDEX IF NOT EXISTS "{INDEX}" ON outreach_stepvariantstats (campaign_id)',
                ),
            ],
        ),
    ]
