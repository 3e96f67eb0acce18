"""A sending host cut off from the network in the middle of a message, its processes
alive, then back: a real Celery worker inside a network namespace (tests/support/netns.py)
reaching PostgreSQL, Redis and an aiosmtpd sink over a veth pair, another worker on this
machine, and the link set down while the sink holds its answer to a message.

What must hold (docs/sending.md, "Unknown outcomes, and dead workers"): the message in
flight is recorded as sent with its reply unseen (it may have reached the server) and
never sent again; once the claims' lease lapses, the other host takes them over and
sends them; the returning host records nothing twice and sends nothing twice."""

from datetime import timedelta

import pytest
from django.utils import timezone

from outreach.models.campaigns import Campaign
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Enrollment, Message, SendClaim
from outreach.sending.scheduler import schedule_due
from tests.e2e.test_sending_e2e import _campaign_at, _wait_until
from tests.outreach.factories import ContactFactory, EnrollmentFactory
from tests.support.celery_worker import send_task

pytestmark = [pytest.mark.e2e]

LEASE_SECONDS = 8  # short, so the other host takes over within the test's minute
ENV = {
    "SENDING_LEASE_SECONDS": str(LEASE_SECONDS),
    "SENDING_SMTP_TIMEOUT_SECONDS": "3",
    "SENDING_SCHEDULE_INTERVAL_SECONDS": "0.5",
}


def _claimed(account, sink, count: int):
    """A campaign of one mailbox at the sink, `count` enrollments due, claimed by one
    scheduler run (in this process) into one batch; its claims in the order the batch
    sends them."""
    campaign = _campaign_at(sink, account, steps=1)
    now = timezone.now()
    for n in range(count):
        EnrollmentFactory(
            campaign=campaign,
            contact=ContactFactory(account=account, email=f"c{n}@example.org"),
            status=Enrollment.Status.SCHEDULED,
            next_send_at=now - timedelta(seconds=count - n),
        )
    Campaign.objects.filter(pk=campaign.pk).update(status=Campaign.Status.ACTIVE)
    [batch] = schedule_due()
    claims = list(
        SendClaim.objects.filter(batch_id=batch.batch_id)
        .select_related("enrollment__contact")
        .order_by("claimed_at", "pk")
    )
    assert len(claims) == count
    return campaign, batch, claims


def _task_done(worker) -> bool:
    return "outreach.tasks.send_mailboxes[" in worker.log and (
        " succeeded in " in worker.log or " raised " in worker.log
    )


def test_a_host_cut_off_mid_message_sends_nothing_twice_and_its_claims_are_taken_over(
    live_db, account, settings, network_host, smtp_sink, celery_worker
):
    settings.SENDING_LEASE_SECONDS = LEASE_SECONDS  # the claims this process makes
    host = network_host
    sink = smtp_sink(host=host.gateway)  # reached from both hosts
    cut_off = celery_worker(
        queues="sending", name="cut", wrap=host.exec_prefix, env={**ENV, **host.service_env()}
    )
    campaign, batch, claims = _claimed(account, sink, 4)  # the lease runs from here
    first, rest = claims[0].enrollment.contact, [c.enrollment.contact for c in claims[1:]]
    sink.hold_data(first.email)  # the sink takes the message and holds its answer

    send_task("outreach.tasks.send_mailboxes", [[str(batch.credential_id), [str(batch.batch_id)]]])
    _wait_until(lambda: sink.to(first.email), timeout=30, what="the first message")
    host.cut()  # mid-message: the whole message is at the sink, its answer not sent
    celery_worker(beat=True, name="other", env=ENV)

    # Past the lease, the other host's scheduler records the message in flight from
    # what its start mark kept, and claims and sends the others.
    _wait_until(
        lambda: all(len(sink.to(contact.email)) == 1 for contact in rest),
        timeout=LEASE_SECONDS + 30,
        what="the other claims sent by the other host",
    )
    assert {m.peer for m in sink.messages if m.rcpt_tos != [first.email]} == {host.gateway}
    held = SendClaim.objects.get(pk=claims[0].pk)
    assert (held.outcome, held.outcome_unknown) == ("sent", True)
    assert not SendClaim.objects.filter(pk__in=[c.pk for c in claims[1:]]).exists()

    host.restore()  # the cut-off host's worker wakes up where it stopped
    _wait_until(lambda: _task_done(cut_off), timeout=30, what="the cut-off host's task ended")

    for contact in [first, *rest]:
        assert len(sink.to(contact.email)) == 1, contact.email
    assert [m.peer for m in sink.to(first.email)] == [host.address]
    messages = Message.objects.filter(enrollment__campaign=campaign)
    assert sorted(m.to_email for m in messages) == sorted(c.email for c in [first, *rest])
    assert [m.to_email for m in messages.filter(reply_seen=False)] == [first.email]
    unknown = Enrollment.objects.get(campaign=campaign, contact=first)
    assert unknown.status == "completed" and "never seen" in unknown.last_error
    assert SmtpCredential.objects.get(pk=batch.credential_id).sent_count == 4
    # It said so, and ended without an error.
    assert "its claim was recovered while this worker was away" in cut_off.log
    assert " raised " not in cut_off.log, cut_off.log[-4000:]
