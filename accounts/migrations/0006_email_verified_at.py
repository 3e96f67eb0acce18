# Accounts prove their signup address before their first dispatch (SIGNUP_EMAIL_VERIFICATION).
# The accounts that exist when this runs predate the rule: they are marked verified, at the
# time of the migration, so a deploy stops no one who was sending already.

from django.db import migrations, models
from django.utils import timezone


def existing_accounts_verified(apps, schema_editor):
    Account = apps.get_model("accounts", "Account")
    Account.objects.filter(email_verified_at__isnull=True).update(email_verified_at=timezone.now())


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0005_idempotency_body_text"),
    ]

    operations = [
        migrations.AddField(
            model_name="account",
            name="email_verified_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.RunPython(existing_accounts_verified, migrations.RunPython.noop),
    ]
