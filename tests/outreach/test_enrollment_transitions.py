"""Every change of an enrollment's status goes through outreach.enrollments.transitions:
each one moves only enrollments in the statuses it leaves, and keeps the campaign's
stats equal to a recount."""

from datetime import timedelta

import pytest
from django.utils import timezone

from outreach import enrollments
from outreach.enrollments import (
    after_step,
    enrollment_schedule,
    enrollments_complete,
    enrollments_fail,
    enrollments_schedule,
    enrollments_stop,
    enrollments_suppressed_end,
)
from outreach.intake.services import contact_unsubscribe
from outreach.models.contacts import Contact
from outreach.models.sending import Enrollment
from outreach.sending.bounces import enrollment_mark_bounced
from outreach.sending.recovery import SUPPRESSED_BOUNCE_REASON, suppressed_end
from tests.outreach.factories import CampaignFactory, ContactFactory
from tests.support.status_writes import StatusScan

pytestmark = pytest.mark.django_db

Status = Enrollment.Status
SCAN = StatusScan(model="Enrollment", table="outreach_enrollment")


def test_only_the_transitions_write_an_enrollment_status():
    assert SCAN.outside(owners=("enrollments/",)) == {}


def test_the_scan_finds_each_shape_of_status_write():
    source = """
enrollment.status = Enrollment.Status.SENT
rows.update(status=Enrollment.Status.FAILED)
changes = {"status": Enrollment.Status.STOPPED}
Enrollment(status=Enrollment.Status.PENDING)
SQL = "UPDATE outreach_enrollment SET status = 'sent'"
rows.filter(status=Enrollment.Status.PENDING)  # a read
campaign.status = Campaign.Status.ACTIVE  # not an enrollment
"""
    assert SCAN.lines(source) == [2, 3, 4, 5, 6]


def _enrolled(campaign, n=1, status=Status.SCHEDULED):
    contacts = [ContactFactory(account=campaign.account) for _ in range(n)]
    enrollments.enroll(campaign_id=campaign.pk, contact_ids=[c.pk for c in contacts])
    Enrollment.objects.filter(campaign=campaign).update(status=status, next_send_at=timezone.now())
    return list(Enrollment.objects.filter(campaign=campaign).order_by("pk"))


def _exact(*campaigns):
    for campaign in campaigns:
        assert enrollments.stats_check(campaign_id=campaign.pk) == {}


def test_a_contact_suppressed_elsewhere_ends_counted_in_every_campaign(account):
    """A bounce in one campaign suppresses the contact; the scheduler then ends its
    enrollment in another campaign as bounced, and that campaign counts it."""
    first, second = (CampaignFactory(account=account, status="active") for _ in range(2))
    contact = ContactFactory(account=account)
    for campaign in (first, second):
        enrollments.enroll(campaign_id=campaign.pk, contact_ids=[contact.pk])
    Enrollment.objects.update(status=Status.SCHEDULED, next_send_at=timezone.now())
    unsubscriber = ContactFactory(account=account)
    enrollments.enroll(campaign_id=second.pk, contact_ids=[unsubscriber.pk])
    Enrollment.objects.filter(contact=unsubscriber).update(
        status=Status.SCHEDULED, next_send_at=timezone.now() + timedelta(days=1)
    )

    assert enrollment_mark_bounced(enrollment=Enrollment.objects.get(campaign=first), reason="550")
    contact_unsubscribe(contact_id=unsubscriber.pk)
    assert suppressed_end(now=timezone.now() + timedelta(seconds=1)) == 1

    ended = Enrollment.objects.get(campaign=second, contact=contact)
    assert (ended.status, ended.bounce_reason) == (Status.BOUNCED, SUPPRESSED_BOUNCE_REASON)
    assert enrollments.stats_read(campaign_ids=[second.pk])[second.pk]["bounced"] == 1
    _exact(first, second)


def test_the_suppressed_end_counts_each_ending_once(account):
    campaign = CampaignFactory(account=account, status="active")
    rows = _enrolled(campaign, 3)
    now = timezone.now()
    Contact.objects.filter(pk=rows[0].contact_id).update(unsubscribed_at=now)
    Contact.objects.filter(pk=rows[1].contact_id).update(unsubscribed_at=now, bounced_at=now)
    due = Enrollment.objects.filter(status__in=Enrollment.DUE_STATUSES)
    assert enrollments_suppressed_end(due, bounce_reason="gone", now=now) == 2
    assert enrollments_suppressed_end(due, bounce_reason="gone", now=now) == 0  # once
    assert sorted(Enrollment.objects.values_list("status", flat=True)) == [
        "scheduled",
        "unsubscribed",
        "unsubscribed",
    ]
    assert enrollments.stats_read(campaign_ids=[campaign.pk])[campaign.pk]["unsubscribed"] == 2
    _exact(campaign)


def test_each_transition_moves_only_the_statuses_it_leaves(account):
    campaign = CampaignFactory(account=account, status="active")
    now = timezone.now()
    rows = _enrolled(campaign, 3, status=Status.PENDING)
    Enrollment.objects.filter(pk=rows[2].pk).update(status=Status.REPLIED)
    everyone = Enrollment.objects.filter(campaign=campaign)

    # Dispatch schedules the pending ones only.
    assert enrollments_schedule(everyone, next_send_at=now, now=now) == 2
    assert not enrollment_schedule(rows[0], next_send_at=now, now=now)  # scheduled already
    # A step sent (the record's statement, tests/outreach/test_sending_record.py) is due
    # again after a delay, or completed after the last step.
    assert after_step(next_send_at=now + timedelta(days=1), now=now)["status"] == Status.SENT
    assert after_step(next_send_at=None, now=now)["status"] == Status.COMPLETED
    assert enrollments_complete(enrollment_ids=[rows[0].pk], now=now) == 1
    # Completion and failure take due enrollments only (the replied one stays).
    assert enrollments_complete(enrollment_ids=[rows[1].pk, rows[2].pk], now=now) == 1
    assert enrollments_fail(everyone, error="no", now=now) == 0
    assert enrollments_stop(everyone, campaign_id=campaign.pk, reason="manual", at=now) == 0
    assert list(everyone.order_by("pk").values_list("status", flat=True)) == [
        Status.COMPLETED,
        Status.COMPLETED,
        Status.REPLIED,
    ]
    assert enrollments.stats_read(campaign_ids=[campaign.pk])[campaign.pk]["sent"] == 0


def test_a_stop_counts_what_it_stopped(account):
    campaign = CampaignFactory(account=account, status="active")
    rows = _enrolled(campaign, 3)
    Enrollment.objects.filter(pk=rows[0].pk).update(status=Status.FAILED)
    now = timezone.now()
    stopped = enrollments_stop(
        Enrollment.objects.filter(campaign=campaign),
        campaign_id=campaign.pk,
        reason="manual",
        at=now,
    )
    assert stopped == 2
    assert enrollments.stats_read(campaign_ids=[campaign.pk])[campaign.pk]["stopped"] == 2
    _exact(campaign)
