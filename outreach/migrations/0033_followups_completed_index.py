"""Follow-up campaigns: the outcomes of a rule beyond API.md's three, and the index of
completed enrollments by completed_at the follow-up sweep reads (only completed rows have
an entry)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("outreach", "0032_simulator_auth_method"),
    ]

    operations = [
        migrations.AlterField(
            model_name="rulefire",
            name="outcome",
            field=models.CharField(
                choices=[
                    ("enrolled", "Enrolled"),
                    ("already_enrolled", "Already Enrolled"),
                    ("pending_over_cap", "Pending Over Cap"),
                    ("pending_draft", "Pending Draft"),
                    ("pending_not_sendable", "Pending Not Sendable"),
                    ("suppressed", "Suppressed"),
                    ("blocked", "Blocked"),
                ],
                max_length=20,
            ),
        ),
        migrations.AddIndex(
            model_name="enrollment",
            index=models.Index(
                condition=models.Q(("status", "completed")),
                fields=["completed_at"],
                name="enrollment_completed_idx",
            ),
        ),
    ]
