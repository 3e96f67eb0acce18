"""Two index entries fewer per event (one event per send; bench/README.md, "WAL per
send"): a job's event index led the unique (event, webhook) index already, and events
are never read by account but when the account is deleted."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0008_recipient_domain_cap_default"),
        ("webhooks", "0006_test_deliveries_and_replay"),
    ]

    operations = [
        migrations.AlterField(
            model_name="deliveryjob",
            name="event",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="jobs",
                to="webhooks.event",
            ),
        ),
        migrations.AlterField(
            model_name="event",
            name="account",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="accounts.account",
            ),
        ),
    ]
