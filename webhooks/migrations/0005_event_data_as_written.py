"""Event.data as PostgreSQL json (kept as written) instead of jsonb (keys sorted by
length): webhook payloads carry `data` in the documented order. Rows written before keep
the order jsonb gave them. The ALTER rewrites the events table: on a large outbox, prune
it first (`manage.py webhooks_prune`)."""

import django.core.serializers.json
from django.db import migrations

import webhooks.models


class Migration(migrations.Migration):
    dependencies = [
        ("webhooks", "0004_secret_encrypted_field"),
    ]

    operations = [
        migrations.AlterField(
            model_name="event",
            name="data",
            field=webhooks.models.WrittenJSONField(
                encoder=django.core.serializers.json.DjangoJSONEncoder
            ),
        ),
    ]
