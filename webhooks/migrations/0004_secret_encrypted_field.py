# The signing secret becomes an EncryptedTextField. The column already holds
# Fernet tokens of the same keyring, as text: renaming it is the only change.

from django.db import migrations

import config.crypto


class Migration(migrations.Migration):
    dependencies = [
        ("webhooks", "0003_keyset_page_indexes"),
    ]

    operations = [
        migrations.RenameField(
            model_name="webhook",
            old_name="secret_encrypted",
            new_name="secret",
        ),
        migrations.AlterField(
            model_name="webhook",
            name="secret",
            field=config.crypto.EncryptedTextField(editable=False),
        ),
    ]
