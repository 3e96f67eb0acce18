"""The circuit breaker end to end: a Celery worker running beat against PostgreSQL and
Redis, an aiosmtpd server answering as Gmail does to an unauthenticated sender, the DNS
test server giving each recipient domain its provider's MX records, and an HTTP
receiver getting the opt-in `credential.throttled` event."""

import time
from collections import Counter
from datetime import timedelta

import pytest
from django.utils import timezone

from outreach.models.campaigns import Campaign
from outreach.models.reputation import ProviderPause
from outreach.models.sending import Enrollment, Message
from tests.e2e.test_sending_e2e import WORKER_ENV, _campaign_at, _verified_events, _wait_until
from tests.outreach.factories import ContactFactory, EnrollmentFactory
from tests.support.provider_refusals import GMAIL_UNAUTHENTICATED, provider_zone
from webhooks.services import webhook_create

pytestmark = [pytest.mark.e2e]

GMAIL_HOSTED = "acme-mail.example"
MICROSOFT_HOSTED = "contoso.example"


def _enroll(campaign, email: str, *, at) -> Enrollment:
    return EnrollmentFactory(
        campaign=campaign,
        contact=ContactFactory(account=campaign.account, email=email),
        status=Enrollment.Status.SCHEDULED,
        next_send_at=at,
        dispatched_at=at,
    )


def _recipients(sink) -> Counter:
    return Counter(address for m in sink.messages for address in m.rcpt_tos)


def test_three_gmail_blocks_pause_that_pair_while_microsoft_mail_goes_on(
    live_db, account, smtp_sink, dns_server, receiver, celery_worker
):
    provider_zone(dns_server, GMAIL_HOSTED, "google")
    provider_zone(dns_server, MICROSOFT_HOSTED, "microsoft")
    sink = smtp_sink()
    secret = webhook_create(
        account=account, url=receiver.url, event_filters=["credential.throttled"]
    ).secret
    campaign = _campaign_at(sink, account, steps=1)
    Campaign.objects.filter(pk=campaign.pk).update(status=Campaign.Status.ACTIVE)
    credential = campaign.credentials.get()
    start = timezone.now() - timedelta(minutes=10)
    blocked = [f"b{i}@{GMAIL_HOSTED}" for i in range(3)]
    held = [f"h{i}@{GMAIL_HOSTED}" for i in range(2)]
    others = [f"m{i}@{MICROSOFT_HOSTED}" for i in range(3)]
    # Due in this order: the three blocks come first, over one connection.
    for index, email in enumerate(blocked + held + others):
        _enroll(campaign, email, at=start + timedelta(seconds=index))
    for email in blocked:
        sink.reject_rcpt(email, GMAIL_UNAUTHENTICATED)

    celery_worker(
        beat=True,
        env={**WORKER_ENV, "DNS_RESOLVERS": dns_server.address, "RECIPIENT_PROVIDER_LOOKUP": "1"},
    )

    sink.wait_for(3, timeout=40)
    [envelope] = _verified_events(receiver, secret, 1, timeout=40)
    assert envelope["type"] == "credential.throttled"
    assert envelope["data"]["provider"] == "google"
    assert envelope["data"]["reason"] == "blocks"
    pause = ProviderPause.objects.get(credential=credential)
    assert envelope["data"]["until"] == pause.until.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    _wait_until(
        lambda: (
            Enrollment.objects.filter(contact__email__in=blocked, status="bounced").count() == 3
        ),
        what="the blocks recorded",
    )
    for email in held:
        enrollment = Enrollment.objects.get(contact__email=email)
        assert (enrollment.status, enrollment.send_attempts) == ("scheduled", 0)
        assert enrollment.next_send_at == pause.until

    # During the pause: a new Microsoft send goes, a new Gmail send waits for the pause.
    now = timezone.now()
    _enroll(campaign, f"m9@{MICROSOFT_HOSTED}", at=now)
    late = _enroll(campaign, f"h9@{GMAIL_HOSTED}", at=now)
    sink.wait_for(4, timeout=40)
    _wait_until(
        lambda: Enrollment.objects.get(pk=late.pk).next_send_at == pause.until,
        what="the new Gmail send held",
    )
    assert _recipients(sink) == Counter([*others, f"m9@{MICROSOFT_HOSTED}"])

    # The hour passes (the pause and its held steps moved to now): the held steps go.
    now = timezone.now()
    Enrollment.objects.filter(next_send_at=pause.until).update(next_send_at=now)
    ProviderPause.objects.filter(pk=pause.pk).update(until=now)
    sink.wait_for(7, timeout=40)
    time.sleep(2)  # a few more scheduler runs: nothing goes twice

    assert _recipients(sink) == Counter(
        [*others, f"m9@{MICROSOFT_HOSTED}", *held, f"h9@{GMAIL_HOSTED}"]
    )
    assert Message.objects.filter(enrollment__campaign=campaign).count() == 7
    assert Enrollment.objects.filter(campaign=campaign, status="completed").count() == 7
    assert Enrollment.objects.filter(campaign=campaign, send_attempts__gt=0).count() == 0
