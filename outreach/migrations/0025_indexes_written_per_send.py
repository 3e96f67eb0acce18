"""Fewer index entries written per send (bench/README.md, "WAL per send").

- The enrollment's unique (campaign, contact) becomes (contact, campaign), and the
  contact's own index goes: the unique index, led by the contact, serves the contact's
  enrollments, and the campaign's are served by the page indexes, which lead with it.
- The message's account index goes: messages are read by enrollment or Message-ID.
- The open claims' lease index goes: the open claims are few and read whole each run.

The enrollment's unique index is built again: on a large table that takes a while, with
the table locked against writes (the scheduler and the senders wait; the API's reads do
not)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0008_recipient_domain_cap_default"),
        ("outreach", "0024_send_attempts"),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="enrollment",
            name="enrollment_unique",
        ),
        migrations.RemoveIndex(
            model_name="sendclaim",
            name="sendclaim_lease_idx",
        ),
        migrations.AlterField(
            model_name="enrollment",
            name="contact",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="enrollments",
                to="outreach.contact",
            ),
        ),
        migrations.AlterField(
            model_name="message",
            name="account",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="accounts.account",
            ),
        ),
        migrations.AddConstraint(
            model_name="enrollment",
            constraint=models.UniqueConstraint(
                fields=("contact", "campaign"), name="enrollment_unique"
            ),
        ),
    ]
