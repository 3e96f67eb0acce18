"""The circuit breaker per mailbox and recipient provider (docs/deliverability.md): the
SMTP sink answers the providers' own refusals, the DNS test server gives each recipient
domain its provider's MX records, and the scheduler and the sender run with a driven
clock."""

from collections import Counter
from datetime import timedelta

import pytest
from django.utils import timezone

from outreach.domains.providers import mx_provider, recipient_provider
from outreach.models.campaigns import Campaign
from outreach.models.mailboxes import SmtpCredential
from outreach.models.reputation import ProviderPause
from outreach.models.sending import Enrollment, SendClaim
from outreach.sending.bounces import enrollment_mark_bounced
from outreach.sending.breaker import pause_length, strike_record
from tests.outreach.factories import CampaignFactory, CredentialFactory
from tests.outreach.test_sending import NOW, _campaign, _enroll, _events, _more_mailboxes, _run
from tests.support.ports import free_port
from tests.support.provider_refusals import (
    GMAIL_RATE_LIMITED,
    GMAIL_UNAUTHENTICATED,
    OUTLOOK_RATE_LIMITED,
    OUTLOOK_UNAUTHENTICATED,
    provider_zone,
)
from tests.webhooks.factories import WebhookFactory

pytestmark = pytest.mark.django_db

GMAIL_HOSTED = "acme-mail.example"
MICROSOFT_HOSTED = "contoso.example"


@pytest.fixture
def zones(dns_server, settings):
    settings.RECIPIENT_PROVIDER_LOOKUP = True
    provider_zone(dns_server, GMAIL_HOSTED, "google")
    provider_zone(dns_server, MICROSOFT_HOSTED, "microsoft")
    provider_zone(dns_server, "bigco.example", "yahoo")
    provider_zone(dns_server, "fruit.example", "apple")
    provider_zone(dns_server, "smallshop.example", "other")
    return dns_server


@pytest.fixture
def sink(smtp_sink, db):
    return smtp_sink()


def _throttled_webhook(campaign):
    return WebhookFactory(account=campaign.account, event_filters=["credential.throttled"])


def _recipients(sink) -> Counter:
    return Counter(address for m in sink.messages for address in m.rcpt_tos)


def test_the_provider_is_read_from_the_domains_mx(zones):
    assert recipient_provider(GMAIL_HOSTED) == "google"
    assert recipient_provider(MICROSOFT_HOSTED) == "microsoft"
    assert recipient_provider("bigco.example") == "yahoo"
    assert recipient_provider("fruit.example") == "apple"
    assert recipient_provider("smallshop.example") == "other"
    assert recipient_provider("nowhere.example") == "other"  # NXDOMAIN
    assert recipient_provider("gmail.com") == "google"  # known without a lookup
    assert mx_provider("ASPMX.L.GOOGLE.COM.") == "google"
    assert mx_provider("notgoogle.com") == "other"


def test_a_failed_lookup_is_other_never_a_provider(zones):
    zones.servfail("broken.example")
    assert recipient_provider("broken.example") == "other"


def test_three_blocks_from_gmail_pause_that_pair_and_microsoft_mail_goes_on(sink, zones):
    campaign = _campaign(sink)
    _throttled_webhook(campaign)
    credential = campaign.credentials.get()
    blocked = [f"b{i}@{GMAIL_HOSTED}" for i in range(3)]
    held = [f"h{i}@{GMAIL_HOSTED}" for i in range(2)]
    others = [f"m{i}@{MICROSOFT_HOSTED}" for i in range(2)]
    for index, address in enumerate(blocked + held + others):
        _enroll(campaign, email=address, at=NOW - timedelta(minutes=10 - index))
        if address in blocked:
            sink.reject_rcpt(address, GMAIL_UNAUTHENTICATED)

    [result] = _run()

    # The three blocks bounced; the pause held the two Gmail sends after them, and the
    # Microsoft ones went on.
    assert (result.sent, result.bounced, result.skipped) == (2, 3, 2)
    assert _recipients(sink) == Counter(others)
    pause = ProviderPause.objects.get(credential=credential)
    assert (pause.provider, pause.until, pause.level, pause.reason) == (
        "google",
        NOW + timedelta(hours=1),
        1,
        "blocks",
    )
    assert pause.detail.startswith("550 5.7.26 This mail has been blocked")
    for address in held:
        enrollment = Enrollment.objects.get(contact__email=address)
        # Held, not attempted: due when the pause ends, no attempt counted.
        assert (enrollment.status, enrollment.send_attempts) == ("scheduled", 0)
        assert enrollment.next_send_at == pause.until
        assert not SendClaim.objects.filter(enrollment=enrollment).exists()
    [event] = _events("credential.throttled")
    assert event == {
        "credential_id": str(credential.pk),
        "from_email": credential.from_email,
        "provider": "google",
        "reason": "blocks",
        "until": "2026-03-02T11:00:00.000000Z",
        "detail": pause.detail,
    }

    # Nothing goes to Gmail during the pause; after it, the held steps go, once each.
    assert _run(NOW + timedelta(minutes=59)) == []
    _run(NOW + timedelta(hours=1))
    assert _recipients(sink) == Counter(others + held)


def test_a_paused_pair_holds_due_steps_at_the_scheduler_without_an_attempt(sink, zones):
    campaign = _campaign(sink)
    credential = campaign.credentials.get()
    for _ in range(3):
        strike_record(
            credential_id=credential.pk, provider="google", reason="blocks", detail="x", at=NOW
        )
    gmail = _enroll(campaign, email=f"ada@{GMAIL_HOSTED}")
    outlook = _enroll(campaign, email=f"bob@{MICROSOFT_HOSTED}")

    _run(NOW + timedelta(minutes=5))

    assert _recipients(sink) == Counter([f"bob@{MICROSOFT_HOSTED}"])
    gmail.refresh_from_db()
    assert (gmail.status, gmail.send_attempts) == ("scheduled", 0)
    assert gmail.next_send_at == NOW + timedelta(hours=1)
    outlook.refresh_from_db()
    assert outlook.status == "completed"


def test_a_new_thread_rotates_past_a_mailbox_paused_toward_its_provider(sink, zones):
    campaign = _campaign(sink)
    first = campaign.credentials.get()
    [second] = _more_mailboxes(campaign, sink, 1)
    for _ in range(3):
        strike_record(
            credential_id=first.pk, provider="google", reason="blocks", detail="x", at=NOW
        )
    enrollments = [_enroll(campaign, email=f"c{i}@{GMAIL_HOSTED}") for i in range(3)]

    _run(NOW)
    # The held mailbox counted among the campaign's takers of the run: a share waits
    # for the next run, which gives it to the other mailbox too.
    _run(NOW)

    senders = {m.mail_from for m in sink.messages}
    assert len(sink.messages) == 3
    assert senders == {second.from_email}
    for enrollment in enrollments:
        enrollment.refresh_from_db()
        assert enrollment.credential_id == second.pk


def test_a_4_7_answer_counts_and_a_held_retry_is_no_attempt(sink, zones, settings):
    settings.SENDING_RETRY_SCHEDULE = [300]
    campaign = _campaign(sink)
    credential = campaign.credentials.get()
    addresses = [f"r{i}@{MICROSOFT_HOSTED}" for i in range(3)]
    for index, address in enumerate(addresses):
        sink.reject_rcpt(address, OUTLOOK_RATE_LIMITED, times=1)
        _enroll(campaign, email=address, at=NOW - timedelta(minutes=3 - index))

    [result] = _run()

    assert result.retried == 3
    pause = ProviderPause.objects.get(credential=credential)
    assert (pause.provider, pause.reason) == ("microsoft", "rate_limited")
    assert pause.detail.startswith("451 4.7.650 The mail server [192.0.2.10]")
    # The retries fall due inside the pause: held until it ends, not attempted.
    _run(NOW + timedelta(minutes=5))
    for enrollment in Enrollment.objects.filter(campaign=campaign):
        assert enrollment.send_attempts == 1
        assert enrollment.next_send_at == pause.until
    _run(pause.until)
    assert _recipients(sink) == Counter(addresses)


def test_a_block_reported_later_counts_where_every_bounce_passes(sink, zones):
    campaign = _campaign(sink)
    credential = campaign.credentials.get()
    enrollments = [_enroll(campaign, email=f"d{i}@{MICROSOFT_HOSTED}") for i in range(3)]
    later = NOW + timedelta(minutes=20)
    other = _enroll(campaign, email=f"e@{MICROSOFT_HOSTED}", at=later)
    _run()
    for enrollment in enrollments[:2]:
        enrollment_mark_bounced(enrollment=enrollment, reason=OUTLOOK_UNAUTHENTICATED, at=later)
    assert not ProviderPause.objects.exists()
    # A hard bounce is no strike.
    enrollment_mark_bounced(enrollment=enrollments[2], reason="550 5.1.1 No such user", at=later)
    assert not ProviderPause.objects.exists()

    _run(later)
    enrollment_mark_bounced(enrollment=other, reason=OUTLOOK_UNAUTHENTICATED, at=later)

    pause = ProviderPause.objects.get(credential=credential)
    assert (pause.provider, pause.until) == ("microsoft", later + timedelta(hours=1))


def test_strikes_older_than_an_hour_do_not_count(db):
    credential = CredentialFactory()
    pair = {"credential_id": credential.pk, "provider": "yahoo", "reason": "blocks", "detail": "x"}
    strike_record(**pair, at=NOW)
    strike_record(**pair, at=NOW + timedelta(minutes=30))
    assert strike_record(**pair, at=NOW + timedelta(minutes=61)) is None
    assert strike_record(**pair, at=NOW + timedelta(minutes=62)) is not None


def test_each_further_pause_doubles_up_to_a_day_and_the_doubling_is_forgotten(db):
    credential = CredentialFactory()
    pair = {"credential_id": credential.pk, "provider": "google", "reason": "blocks", "detail": "x"}
    at, lengths = NOW, []
    for _ in range(7):
        for _ in range(3):
            pause = strike_record(**pair, at=at)
        assert pause is not None
        lengths.append(pause.until - at)
        at = pause.until + timedelta(minutes=1)
    assert [length / timedelta(hours=1) for length in lengths] == [1, 2, 4, 8, 16, 24, 24]
    # A strike while paused changes nothing.
    assert strike_record(**pair, at=pause.until - timedelta(minutes=1)) is None
    # 24 hours without a pause: the series starts again at an hour.
    at = pause.until + timedelta(hours=24)
    for _ in range(3):
        pause = strike_record(**pair, at=at)
    assert (pause.level, pause.until - at) == (1, timedelta(hours=1))
    assert pause_length(99) == timedelta(hours=24)


def test_no_event_without_a_webhook_asking_for_it(sink, zones):
    campaign = _campaign(sink)
    credential = campaign.credentials.get()
    for _ in range(3):
        strike_record(
            credential_id=credential.pk, provider="google", reason="blocks", detail="x", at=NOW
        )
    assert ProviderPause.objects.filter(credential=credential).exists()
    assert _events("credential.throttled") == []


def test_sending_status_and_the_mailbox_show_the_pause(sink, zones, api_client, account):
    campaign = _campaign(sink)
    type(campaign).objects.filter(pk=campaign.pk).update(account=account)
    credential = campaign.credentials.get()
    type(credential).objects.filter(pk=credential.pk).update(account=account)
    now = timezone.now()
    for _ in range(3):
        strike_record(
            credential_id=credential.pk,
            provider="google",
            reason="blocks",
            detail=GMAIL_UNAUTHENTICATED.split("\r\n")[0],
            at=now,
        )
    until = (now + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    status = api_client.get(f"/campaigns/{campaign.pk}/sending_status").json()
    [box] = status["mailboxes"]
    [paused] = [r for r in box["reasons"] if r["code"] == "provider_paused"]
    assert paused == {
        "code": "provider_paused",
        "provider": "google",
        "until": until,
        "detail": GMAIL_UNAUTHENTICATED.split("\r\n")[0],
        "since": None,
        "retry_at": None,
    }
    mailbox = api_client.get(f"/smtp_credentials/{credential.pk}").json()
    assert mailbox["provider_pauses"] == [
        {
            "provider": "google",
            "until": until,
            "reason": "blocks",
            "detail": GMAIL_UNAUTHENTICATED.split("\r\n")[0],
        }
    ]


# --- temporary refusals: the series ends in a soft bounce ------------------------------------


def test_a_series_of_4xx_ends_soft_expired_after_soft_bounce_max_hours(sink, settings):
    settings.SENDING_RETRY_SCHEDULE = [30 * 3600]
    settings.SENDING_MAX_ATTEMPTS = 10
    settings.SOFT_BOUNCE_MAX_HOURS = 72
    campaign = _campaign(sink)
    sink.reject_rcpt("full@example.org", "452 4.2.2 Mailbox full")
    enrollment = _enroll(campaign, email="full@example.org")

    _run()
    _run(NOW + timedelta(hours=30))
    enrollment.refresh_from_db()
    assert (enrollment.status, enrollment.send_attempts) == ("scheduled", 2)
    # The third attempt, 60 hours in: a fourth would come 90 hours after the first.
    _run(NOW + timedelta(hours=60))

    enrollment.refresh_from_db()
    assert (enrollment.status, enrollment.send_attempts) == ("bounced", 3)
    assert enrollment.bounce_reason == (
        "4.4.7 Delivery expired after 3 attempts over 72 hours; last reply: 452 4.2.2 Mailbox full"
    )
    assert (enrollment.bounce_type, enrollment.bounce_category) == ("soft", "expired")
    [event] = _events("enrollment.bounced")
    assert event["enrollment_id"] == str(enrollment.pk)
    assert sink.messages == []
    assert not ProviderPause.objects.exists()  # a full mailbox is no strike


def test_connection_failures_still_end_failed(settings):
    settings.SENDING_RETRY_SCHEDULE = [60]
    settings.SENDING_MAX_ATTEMPTS = 2
    campaign = CampaignFactory(status=Campaign.Status.ACTIVE)
    SmtpCredential.objects.filter(campaigns=campaign).update(
        smtp_host="127.0.0.1", smtp_port=free_port(), smtp_security="none"
    )
    enrollment = _enroll(campaign, email="ada@example.org")

    _run()
    _run(NOW + timedelta(seconds=60))

    enrollment.refresh_from_db()
    assert (enrollment.status, enrollment.send_attempts) == ("failed", 2)
    assert enrollment.bounced_at is None
    assert _events("enrollment.bounced") == []


def test_gmail_421_rate_limits_close_the_session_and_the_next_message_reconnects(sink, zones):
    campaign = _campaign(sink)
    credential = campaign.credentials.get()
    limited = [f"l{i}@{GMAIL_HOSTED}" for i in range(3)]
    for index, address in enumerate(limited):
        sink.reject_rcpt(address, GMAIL_RATE_LIMITED, times=1)
        _enroll(campaign, email=address, at=NOW - timedelta(minutes=5 - index))
    other = _enroll(campaign, email=f"ok@{MICROSOFT_HOSTED}")

    [result] = _run()

    # Each 421 closed the session; the next message opened another, and no message was
    # charged an attempt for a session the server had closed.
    assert (result.retried, result.sent) == (3, 1)
    other.refresh_from_db()
    assert (other.status, other.send_attempts) == ("completed", 0)
    pause = ProviderPause.objects.get(credential=credential)
    assert (pause.provider, pause.reason) == ("google", "rate_limited")
    assert "4.7.28" in pause.detail
