"""stop_on_domain_reply: a reply read from the mailbox (a real Dovecot) stops the
campaign's other active enrollments at the replier's company domain, never at a
consumer mail domain; and a stop never overwrites an enrollment that ended meanwhile."""

import pytest

from outreach.campaigns.stopping import enrollment_stop
from outreach.domains.consumer import CONSUMER_MAIL_DOMAINS, is_consumer_domain
from outreach.intake.mailbox import mailbox_poll
from outreach.intake.services import enrollment_mark_replied
from outreach.models.campaigns import Campaign
from outreach.models.sending import Enrollment
from tests.intake.conftest import requires_dovecot
from tests.intake.factories import first_message, sent_enrollment
from tests.intake.helpers import events
from tests.intake.mail import reply
from tests.intake.test_mailbox import with_imap
from tests.outreach.factories import CampaignFactory, ContactFactory
from tests.support.threads import at_once

pytestmark = pytest.mark.django_db


def _campaign(**kwargs) -> Campaign:
    return CampaignFactory(status=Campaign.Status.ACTIVE, with_steps=3, **kwargs)


def _colleague(campaign, email: str, **kwargs) -> Enrollment:
    contact = ContactFactory(account=campaign.account, email=email)
    return sent_enrollment(campaign=campaign, contact=contact, **kwargs)


def _reply_from(enrollment, mailbox) -> None:
    credential = with_imap(enrollment, mailbox)
    mailbox.append(
        reply(
            sender=enrollment.contact.email,
            to=credential.from_email,
            in_reply_to=first_message(enrollment).message_id,
        )
    )
    credential.refresh_from_db()
    result = mailbox_poll(credential=credential)
    assert result.error == "", result.error
    assert [o.kind for o in result.outcomes] == ["replied"]


def _statuses(*enrollments) -> list[str]:
    for enrollment in enrollments:
        enrollment.refresh_from_db()
    return [e.status for e in enrollments]


@requires_dovecot
def test_a_reply_stops_colleagues_but_not_other_companies(imap_mailbox):
    campaign = _campaign(stop_on_domain_reply=True)
    replier = _colleague(campaign, "ada@acme.example")
    colleague = _colleague(campaign, "Grace@ACME.example")  # case does not matter
    not_dispatched = ContactFactory(account=campaign.account, email="bob@acme.example")
    pending = campaign.enrollments.create(contact=not_dispatched)
    elsewhere = _colleague(campaign, "linus@other.example")
    subdomain = _colleague(campaign, "ken@eu.acme.example")  # another domain
    already_replied = _colleague(campaign, "alan@acme.example")
    Enrollment.objects.filter(pk=already_replied.pk).update(status="replied")

    _reply_from(replier, imap_mailbox)

    assert _statuses(replier, colleague, pending, elsewhere, subdomain, already_replied) == [
        "replied",
        "stopped",
        "stopped",
        "sent",
        "sent",
        "replied",
    ]
    for stopped in (colleague, pending):
        assert stopped.stop_reason == "domain_reply"
        assert stopped.stopped_at == replier.replied_at
        assert stopped.next_send_at is None
    # Only the replier's event: a stop is not the contact's doing.
    assert [e.data["enrollment_id"] for e in events()] == [str(replier.pk)]


@requires_dovecot
def test_a_reply_from_a_consumer_domain_stops_no_one_else(imap_mailbox):
    campaign = _campaign(stop_on_domain_reply=True)
    replier = _colleague(campaign, "ada@gmail.com")
    other_gmail = _colleague(campaign, "grace@gmail.com")
    googlemail = _colleague(campaign, "alan@googlemail.com")

    _reply_from(replier, imap_mailbox)

    assert _statuses(replier, other_gmail, googlemail) == ["replied", "sent", "sent"]


@requires_dovecot
def test_without_the_setting_a_reply_stops_only_the_replier(imap_mailbox):
    campaign = _campaign()
    replier = _colleague(campaign, "ada@acme.example")
    colleague = _colleague(campaign, "grace@acme.example")

    _reply_from(replier, imap_mailbox)

    assert _statuses(replier, colleague) == ["replied", "sent"]


def test_the_stop_stays_in_the_campaign():
    campaign = _campaign(stop_on_domain_reply=True)
    replier = _colleague(campaign, "ada@acme.example")
    other_campaign = _campaign(account=campaign.account, stop_on_domain_reply=True)
    same_contact_elsewhere = sent_enrollment(campaign=other_campaign, contact=replier.contact)
    colleague_elsewhere = _colleague(other_campaign, "grace@acme.example")

    enrollment_mark_replied(enrollment_id=replier.pk)

    assert _statuses(same_contact_elsewhere, colleague_elsewhere) == ["sent", "sent"]


def test_stopping_the_last_colleagues_completes_the_campaign():
    campaign = _campaign(stop_on_domain_reply=True)
    replier = _colleague(campaign, "ada@acme.example")
    colleague = _colleague(campaign, "grace@acme.example")

    enrollment_mark_replied(enrollment_id=replier.pk)

    assert _statuses(colleague) == ["stopped"]
    campaign.refresh_from_db()
    assert campaign.status == Campaign.Status.COMPLETED


def test_a_reply_without_stop_on_reply_still_stops_colleagues():
    campaign = _campaign(stop_on_domain_reply=True, stop_on_reply=False)
    replier = _colleague(campaign, "ada@acme.example")
    colleague = _colleague(campaign, "grace@acme.example")

    enrollment_mark_replied(enrollment_id=replier.pk)

    assert _statuses(replier, colleague) == ["sent", "stopped"]


def test_the_consumer_domain_list():
    for domain in ("gmail.com", "outlook.com", "yahoo.com", "icloud.com", "proton.me", "qq.com"):
        assert is_consumer_domain(domain)
        assert is_consumer_domain(domain.upper())
    assert not is_consumer_domain("acme.example")
    assert all(d == d.lower().strip() and "." in d for d in CONSUMER_MAIL_DOMAINS)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("run", range(5))
def test_a_reply_and_a_stop_that_meet_never_overwrite_each_other(run):
    """The colleague's own reply and the domain stop (from another colleague's reply),
    and a manual stop, all at once: the colleague ends either replied or stopped, with
    the matching fields, never both and never overwritten."""
    campaign = _campaign(stop_on_domain_reply=True)
    replier = _colleague(campaign, "ada@acme.example")
    colleague = _colleague(campaign, "grace@acme.example")
    stopped_by_hand: list[bool] = []
    calls = [
        lambda: enrollment_mark_replied(enrollment_id=replier.pk),
        lambda: enrollment_mark_replied(enrollment_id=colleague.pk),
        lambda: stopped_by_hand.append(enrollment_stop(enrollment_id=colleague.pk)),
    ]
    at_once(calls)

    colleague.refresh_from_db()
    # Its reply is always recorded and announced (a reply is never lost).
    assert colleague.replied_at is not None
    replied_events = [e.data["enrollment_id"] for e in events("enrollment.replied")]
    assert sorted(replied_events) == sorted([str(replier.pk), str(colleague.pk)])
    if colleague.status == Enrollment.Status.REPLIED:
        # The reply came first: neither stop touched it.
        assert colleague.stopped_at is None and colleague.stop_reason == ""
        assert stopped_by_hand == [False]
    else:
        # A stop came first: the reply is recorded, the status stays stopped.
        assert colleague.status == Enrollment.Status.STOPPED
        assert colleague.stop_reason in ("manual", "domain_reply")
        assert stopped_by_hand == [colleague.stop_reason == "manual"]
    assert colleague.next_send_at is None
