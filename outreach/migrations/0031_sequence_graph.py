"""Sequences that react (API.md 17): step keys and branches, an enrollment's place in
the graph (current_key, path, branch_deadline), per-message opens and clicks, follow-up
rules. Existing rows get what they already were: steps `step_<position>` each leading to
the next, enrollments at the step after their last, their path the steps they sent."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("outreach", "0030_reply_sender_verified_mailbox_authserv_id"),
    ]

    operations = [
        migrations.CreateModel(
            name="RuleFire",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("rule", models.CharField(max_length=40)),
                (
                    "outcome",
                    models.CharField(
                        choices=[
                            ("enrolled", "Enrolled"),
                            ("already_enrolled", "Already Enrolled"),
                            ("pending_over_cap", "Pending Over Cap"),
                        ],
                        max_length=20,
                    ),
                ),
                ("created_at", models.DateTimeField(auto_now_add=True)),
            ],
        ),
        migrations.AddField(
            model_name="campaign",
            name="on_complete",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="campaign",
            name="on_reply",
            field=models.JSONField(blank=True, db_default=[], default=list),
        ),
        migrations.AddField(
            model_name="campaignstep",
            name="branch",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="campaignstep",
            name="key",
            field=models.CharField(default="", max_length=40),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="campaignstep",
            name="next_key",
            field=models.CharField(blank=True, default="", max_length=40),
        ),
        migrations.AddField(
            model_name="enrollment",
            name="branch_deadline",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="enrollment",
            name="current_key",
            field=models.CharField(blank=True, max_length=40, null=True),
        ),
        migrations.AddField(
            model_name="enrollment",
            name="held_until",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="enrollment",
            name="last_step",
            field=models.PositiveSmallIntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name="enrollment",
            name="path",
            field=models.JSONField(blank=True, db_default=[], default=list),
        ),
        migrations.AddField(
            model_name="message",
            name="clicked_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="message",
            name="opened_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="message",
            name="step_key",
            field=models.CharField(blank=True, db_default="", default="", max_length=40),
        ),
        migrations.AddField(
            model_name="reply",
            name="rule_outcomes",
            field=models.JSONField(blank=True, db_default=[], default=list),
        ),
        migrations.AlterField(
            model_name="reply",
            name="label",
            field=models.CharField(
                blank=True,
                choices=[
                    ("interested", "Interested"),
                    ("not_interested", "Not Interested"),
                    ("not_now", "Not Now"),
                    ("meeting_booked", "Meeting Booked"),
                    ("wrong_person", "Wrong Person"),
                    ("out_of_office", "Out Of Office"),
                    ("auto_reply", "Auto Reply"),
                    ("unsubscribe_request", "Unsubscribe Request"),
                    ("other", "Other"),
                ],
                default="",
                max_length=24,
            ),
        ),
        migrations.AddIndex(
            model_name="enrollment",
            index=models.Index(
                condition=models.Q(("branch_deadline__isnull", False), ("status", "sent")),
                fields=["branch_deadline"],
                name="enrollment_branch_deadline_idx",
            ),
        ),
        migrations.RunSQL(
            sql=[
                """
                UPDATE outreach_campaignstep AS s SET key = 'step_' || s.position,
                    next_key = CASE WHEN EXISTS (
                        SELECT FROM outreach_campaignstep AS n
                        WHERE n.campaign_id = s.campaign_id AND n.position = s.position + 1
                    ) THEN 'step_' || (s.position + 1) ELSE 'end' END
                """,
                """
                UPDATE outreach_enrollment AS e SET last_step = e.current_step,
                    current_key = CASE WHEN e.status IN ('scheduled', 'sent') AND EXISTS (
                        SELECT FROM outreach_campaignstep AS n
                        WHERE n.campaign_id = e.campaign_id AND n.position = e.current_step + 1
                    ) THEN 'step_' || (e.current_step + 1) END,
                    path = (
                        SELECT COALESCE(jsonb_agg('step_' || g ORDER BY g), '[]'::jsonb)
                        FROM generate_series(1, e.current_step) AS g
                    )
                """,
                "UPDATE outreach_message SET step_key = 'step_' || step",
            ],
            reverse_sql=migrations.RunSQL.noop,
        ),
        migrations.AddConstraint(
            model_name="campaignstep",
            constraint=models.UniqueConstraint(fields=("campaign", "key"), name="step_key_unique"),
        ),
        migrations.AddField(
            model_name="rulefire",
            name="campaign",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="outreach.campaign",
            ),
        ),
        migrations.AddField(
            model_name="rulefire",
            name="enrollment",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="outreach.enrollment",
            ),
        ),
        migrations.AddConstraint(
            model_name="rulefire",
            constraint=models.UniqueConstraint(
                fields=("enrollment", "rule"), name="rulefire_unique"
            ),
        ),
    ]
