"""Which mailbox a new thread goes to: the campaign's rotation (docs/sending.md)."""

from collections import Counter
from datetime import UTC, datetime

import pytest

from outreach.models.campaigns import Campaign
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Enrollment
from outreach.sending.scheduler import schedule_due
from tests.outreach.factories import (
    CampaignFactory,
    ContactFactory,
    CredentialFactory,
    EnrollmentFactory,
)

NOW = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)

pytestmark = pytest.mark.django_db


def _campaign(mailboxes: int, **pace) -> tuple[Campaign, list[SmtpCredential]]:
    """An active campaign on `mailboxes` mailboxes, in link order."""
    campaign = CampaignFactory(with_steps=1, status=Campaign.Status.ACTIVE)
    first = campaign.credentials.get()
    more = [CredentialFactory(account=campaign.account) for _ in range(mailboxes - 1)]
    for mailbox in more:  # one at a time: the link order is the links' creation order
        campaign.credentials.add(mailbox)
    linked = [first, *more]
    SmtpCredential.objects.filter(pk__in=[m.pk for m in linked]).update(daily_limit=100, **pace)
    return campaign, linked


def _due(campaign, count: int) -> None:
    for _ in range(count):
        EnrollmentFactory(
            campaign=campaign,
            contact=ContactFactory(account=campaign.account),
            status=Enrollment.Status.SCHEDULED,
            next_send_at=NOW,
            dispatched_at=NOW,
        )


def _sent_today(mailbox: SmtpCredential, count: int) -> None:
    SmtpCredential.objects.filter(pk=mailbox.pk).update(
        daily_sent_count=count, daily_sent_on=NOW.date()
    )


def _claims(batches) -> Counter:
    claims: Counter = Counter()
    for batch in batches:
        claims[batch.credential_id] += batch.size
    return claims


PACED = {"min_interval_seconds": 10, "max_interval_seconds": 20}


def test_a_new_thread_goes_to_the_mailbox_with_the_most_room_left_today():
    campaign, (first, second, third) = _campaign(3, **PACED)
    _sent_today(first, 50)
    _sent_today(third, 10)
    _due(campaign, 1)

    assert _claims(schedule_due(now=NOW)) == {second.pk: 1}


def test_mailboxes_with_the_same_room_take_new_threads_in_link_order():
    campaign, (first, second, third) = _campaign(3, **PACED)
    _sent_today(first, 10)
    _due(campaign, 2)

    # second and third have the same room, more than first's: second, the first linked.
    claims = _claims(schedule_due(now=NOW))
    assert claims == {second.pk: 1, third.pk: 1}


def test_paced_mailboxes_take_one_new_thread_each_per_run_most_room_first():
    campaign, linked = _campaign(5, **PACED)
    for sent, mailbox in zip([40, 0, 30, 10, 20], linked, strict=True):
        _sent_today(mailbox, sent)
    _due(campaign, 3)

    claims = _claims(schedule_due(now=NOW))
    assert claims == {linked[1].pk: 1, linked[3].pk: 1, linked[4].pk: 1}
    assert Enrollment.objects.not_in_flight().count() == 0


def test_unpaced_mailboxes_fill_to_their_share_one_after_the_other():
    """A run gives each mailbox at most its even share of the new threads, one mailbox
    filled before the next: its claims of the run go out over one connection."""
    campaign, linked = _campaign(4)
    _due(campaign, 10)  # a share of ceil(10 / 4) = 3

    claims = _claims(schedule_due(now=NOW))
    assert sorted(claims.values()) == [1, 3, 3, 3]
    # Filled in link order (all have the same room), the last one gets what is left.
    assert [claims[m.pk] for m in linked] == [3, 3, 3, 1]


def test_with_no_mailbox_left_with_room_a_new_thread_waits_for_tomorrow():
    campaign, (first, second) = _campaign(2, **PACED)
    _sent_today(first, 100)  # full
    _sent_today(second, 100)
    _due(campaign, 1)

    assert schedule_due(now=NOW) == []
    waiting = Enrollment.objects.get(campaign=campaign)
    assert waiting.next_send_at == datetime(2026, 3, 3, 0, 0, tzinfo=UTC)
