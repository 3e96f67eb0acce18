"""Each signal fires once even when it arrives several times at once (PostgreSQL:
separate connections, real row locks)."""

from outreach.intake.services import (
    contact_unsubscribe,
    enrollment_mark_opened,
    enrollment_mark_replied,
)
from tests.intake.factories import sent_enrollment
from tests.intake.helpers import events
from tests.support.threads import at_once


def in_threads(call, count: int = 8) -> None:
    at_once([call] * count)


def test_concurrent_unsubscribes_announce_each_enrollment_once(live_db):
    first = sent_enrollment()
    second = sent_enrollment(account=first.campaign.account, contact=first.contact)
    in_threads(lambda: contact_unsubscribe(contact_id=first.contact_id))
    assert sorted(e.data["enrollment_id"] for e in events("enrollment.unsubscribed")) == sorted(
        [str(first.pk), str(second.pk)]
    )


def test_concurrent_replies_and_opens_fire_once(live_db):
    enrollment = sent_enrollment()
    in_threads(lambda: enrollment_mark_replied(enrollment_id=enrollment.pk))
    in_threads(lambda: enrollment_mark_opened(enrollment_id=enrollment.pk))
    assert len(events("enrollment.replied")) == 1
    assert len(events("enrollment.opened")) == 1
