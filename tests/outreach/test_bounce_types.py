"""What a bounce means (docs/sending.md, "Bounce types"): the classifier on the words of
the major providers, and what each type does to the enrollment and the contact, through
the sending engine (a real SMTP server refusing at RCPT) and the bounce service."""

import pytest

from outreach.bounce_types import classify
from outreach.models.contacts import Contact, Suppression
from outreach.models.sending import CredentialCampaignStats
from outreach.sending.bounces import enrollment_mark_bounced
from tests.outreach.factories import CampaignFactory, ContactFactory, EnrollmentFactory
from tests.outreach.test_sending import NOW, _campaign, _enroll, _events, _run

pytestmark = pytest.mark.django_db


# The replies as the providers publish them (their bounce and postmaster pages).
@pytest.mark.parametrize(
    ("code", "text", "type_", "category", "rate_limited"),
    [
        (
            550,
            "5.1.1 The email account that you tried to reach does not exist.",
            "hard",
            "user_unknown",
            False,
        ),
        (
            550,
            "5.7.26 Unauthenticated email from example.com is not accepted due to domain's "
            "DMARC policy.",
            "block",
            "security_error",
            False,
        ),
        (
            550,
            "5.7.515 Access denied, sending domain example.com doesn't meet the required "
            "authentication level.",
            "block",
            "security_error",
            False,
        ),
        (
            421,
            "4.7.28 Our system has detected an unusual rate of unsolicited mail originating "
            "from your IP address.",
            "soft",
            "blocked",
            True,
        ),
        (
            451,
            "4.7.650 The mail server [192.0.2.1] has been temporarily rate limited due to IP "
            "reputation.",
            "soft",
            "rate_limited",
            True,
        ),
        (
            421,
            "4.7.0 [TSS04] Messages from 192.0.2.1 temporarily deferred due to unexpected "
            "volume or user complaints",
            "soft",
            "rate_limited",
            True,
        ),
        (
            554,
            "delivery error: dd This user doesn't have a yahoo.com account "
            "(bob@yahoo.com) [0] - mta1.mail.bf1.yahoo.com",
            "hard",
            "user_unknown",
            False,
        ),
        (
            552,
            "5.2.2 The email account that you tried to reach is over quota.",
            "soft",
            "mailbox_full",
            False,
        ),
        (
            550,
            "5.7.1 Service unavailable; Client host [192.0.2.1] blocked using zen.spamhaus.org",
            "block",
            "blocked",
            False,
        ),
        (554, "5.7.1 [CS01] Message rejected due to local policy.", "block", "blocked", False),
        (
            550,
            "Rejected by header based Blocked Senders - Block for manual block",
            "block",
            "rejected",
            False,
        ),
        (
            550,
            "5.1.1 <bob@example.org>: Recipient address rejected: User unknown in local "
            "recipient table",
            "hard",
            "user_unknown",
            False,
        ),
        (
            550,
            "5.2.1 The email account that you tried to reach is disabled.",
            "hard",
            "mailbox_disabled",
            False,
        ),
        (
            452,
            "4.2.2 The email account that you tried to reach is over quota.",
            "soft",
            "mailbox_full",
            False,
        ),
        (550, "Requested action not taken: mailbox unavailable", "hard", "user_unknown", False),
        (554, "5.0.0 something nobody wrote down", "hard", "undefined", False),
    ],
)
def test_it_reads_the_providers_words(code, text, type_, category, rate_limited):
    klass = classify(code=code, text=text)
    assert (klass.type, klass.category, klass.rate_limited) == (type_, category, rate_limited)


@pytest.fixture
def sink(smtp_sink, db):
    return smtp_sink()


def test_a_block_at_rcpt_bounces_the_enrollment_but_keeps_the_contact_sendable(sink):
    campaign = _campaign(sink)
    credential = campaign.credentials.get()
    sink.reject_rcpt(
        "ada@example.org",
        "550 5.7.1 Service unavailable; Client host [192.0.2.1] blocked using zen.spamhaus.org",
        times=1,
    )
    enrollment = _enroll(campaign, email="ada@example.org")

    [result] = _run()

    assert result.bounced == 1
    enrollment.refresh_from_db()
    assert enrollment.status == "bounced"
    assert (enrollment.bounce_type, enrollment.bounce_category) == ("block", "blocked")
    contact = Contact.objects.get(pk=enrollment.contact_id)
    assert contact.bounced_at is None
    assert not Suppression.objects.filter(email_lower="ada@example.org").exists()
    # Counted toward the mailbox's bounce rate like any bounce.
    stats = CredentialCampaignStats.objects.get(credential=credential)
    assert (stats.sends, stats.bounces) == (1, 1)
    [bounced] = _events("enrollment.bounced")
    assert (bounced["bounce_type"], bounced["bounce_category"]) == ("block", "blocked")

    # Another campaign may still write to the contact.
    other = _campaign(sink, account=campaign.account)
    EnrollmentFactory(
        campaign=other, contact=contact, status="scheduled", next_send_at=NOW, dispatched_at=NOW
    )
    [again] = _run()
    assert again.sent == 1
    assert len(sink.to("ada@example.org")) == 1


def test_a_hard_refusal_at_rcpt_suppresses_the_contact(sink):
    campaign = _campaign(sink)
    sink.reject_rcpt("gone@example.org", "550 5.1.1 <gone@example.org>: no such user")
    enrollment = _enroll(campaign, email="gone@example.org")
    _run()
    enrollment.refresh_from_db()
    assert (enrollment.bounce_type, enrollment.bounce_category) == ("hard", "user_unknown")
    assert Contact.objects.get(pk=enrollment.contact_id).bounced_at == NOW
    assert Suppression.objects.filter(email_lower="gone@example.org").exists()


@pytest.mark.parametrize(
    ("reason", "type_", "category"),
    [
        ("552 5.2.2 mailbox full", "soft", "mailbox_full"),
        ("552 5.3.4 message too big for system", "soft", "message_too_large"),
        ("550 5.7.26 fails to pass authentication checks", "block", "security_error"),
    ],
)
def test_soft_and_block_bounces_end_the_enrollment_without_suppressing(reason, type_, category):
    campaign = CampaignFactory()
    contact = ContactFactory(account=campaign.account, email="kept@example.org")
    enrollment = EnrollmentFactory(campaign=campaign, contact=contact)

    assert enrollment_mark_bounced(enrollment=enrollment, reason=reason, at=NOW)

    enrollment.refresh_from_db()
    assert (enrollment.status, enrollment.bounce_type, enrollment.bounce_category) == (
        "bounced",
        type_,
        category,
    )
    contact.refresh_from_db()
    assert contact.bounced_at is None
    assert not Suppression.objects.filter(email_lower="kept@example.org").exists()
    [event] = _events("enrollment.bounced")
    assert (event["bounce_type"], event["bounce_category"]) == (type_, category)


def test_the_api_shows_the_bounce_type(api_client, account):
    campaign = CampaignFactory(account=account)
    enrollment = EnrollmentFactory(campaign=campaign)
    enrollment_mark_bounced(enrollment=enrollment, reason="550 5.1.1 no such user", at=NOW)
    response = api_client.get(f"/campaigns/{campaign.pk}/enrollments")
    assert response.status_code == 200
    [row] = response.json()
    assert (row["bounce_type"], row["bounce_category"]) == ("hard", "user_unknown")


@pytest.mark.parametrize(
    "reply",
    [
        "451 4.7.1 <ada@example.org>: Recipient address rejected: Greylisted, try again later",
        "451 4.7.1 Please try again later (greylisting in action)",
        "450 4.2.0 Recipient address rejected: Graylisted, see http://postgrey.schweikert.ch/",
    ],
)
def test_greylisting_is_retried_and_never_a_breaker_strike(reply):
    from outreach.sending.breaker import strike_reason

    klass = classify(code=None, text=reply)
    assert (klass.type, klass.category, klass.rate_limited) == ("soft", "greylisted", False)
    assert strike_reason(code=int(reply[:3]), text=reply) is None
    # A 4.7.x that is not greylisting still counts.
    assert (
        strike_reason(code=421, text="421 4.7.28 unusual rate of unsolicited mail")
        == "rate_limited"
    )
