"""0031 gives every existing campaign and enrollment the straight line it already was:
steps `step_<position>` each leading to the next, enrollments at the step after their
last, their path the steps they sent, their messages' step keys."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from tests.outreach.factories import CampaignFactory, ContactFactory

pytestmark = pytest.mark.django_db

BEFORE = [("outreach", "0030_reply_sender_verified_mailbox_authserv_id")]
AFTER = [("outreach", "0031_sequence_graph")]


def _old_state(campaign, contacts) -> None:
    """At 0030: enrollments of every kind, and the messages they sent."""
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps
    OldEnrollment = old.get_model("outreach", "Enrollment")
    OldMessage = old.get_model("outreach", "Message")
    now = timezone.now()
    cases = [("pending", 0), ("scheduled", 0), ("sent", 1), ("sent", 3), ("completed", 3)]
    for contact, (status, sent) in zip(contacts, cases, strict=True):
        enrollment = OldEnrollment.objects.create(
            campaign_id=campaign.pk, contact_id=contact.pk, status=status, current_step=sent
        )
        for step in range(1, sent + 1):
            OldMessage.objects.create(
                account_id=campaign.account_id,
                enrollment_id=enrollment.pk,
                step=step,
                message_id=f"{enrollment.pk}.{step}@example.com",
                to_email=contact.email,
                sent_at=now,
            )


# Outside a test transaction: the way back passes 0042, whose index is built and dropped
# CONCURRENTLY, which PostgreSQL refuses inside one.
@pytest.mark.django_db(transaction=True)
def test_the_migration_keeps_every_campaign_a_straight_line():
    campaign = CampaignFactory(with_steps=3)
    contacts = [ContactFactory(account=campaign.account) for _ in range(5)]
    # Foreign keys checked as rows are written: ALTER TABLE refuses a table with checks
    # still pending in the transaction.
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    try:
        _old_state(campaign, contacts)
        executor = MigrationExecutor(connection)
        executor.migrate(AFTER)
        # The models as 0031 left them: later migrations add columns the current models
        # would select.
        new = executor.loader.project_state(AFTER).apps
        CampaignStep = new.get_model("outreach", "CampaignStep")
        Enrollment = new.get_model("outreach", "Enrollment")
        Message = new.get_model("outreach", "Message")

        steps = CampaignStep.objects.filter(campaign_id=campaign.pk).order_by("position")
        assert [(s.key, s.next_key, s.branch) for s in steps] == [
            ("step_1", "step_2", None),
            ("step_2", "step_3", None),
            ("step_3", "end", None),
        ]
        rows = {
            e.contact_id: (e.status, e.current_key, e.path, e.last_step, e.current_step)
            for e in Enrollment.objects.filter(campaign_id=campaign.pk)
        }
        assert [rows[c.pk] for c in contacts] == [
            ("pending", None, [], 0, 0),
            ("scheduled", "step_1", [], 0, 0),
            ("sent", "step_2", ["step_1"], 1, 1),
            # Its last step sent, the scheduler completes it as before.
            ("sent", None, ["step_1", "step_2", "step_3"], 3, 3),
            ("completed", None, ["step_1", "step_2", "step_3"], 3, 3),
        ]
        keys = Message.objects.filter(enrollment__campaign_id=campaign.pk).values_list(
            "step", "step_key"
        )
        assert sorted(keys) == [(s, f"step_{s}") for s in (1, 1, 1, 2, 2, 3, 3)]
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
