"""End to end with real peers: a Celery worker running beat (the send scheduler every
half second) against PostgreSQL and Redis, an aiosmtpd server receiving the mail, and an
HTTP receiver getting the signed webhook events. The three-step campaign also runs
with the worker and the API behind a real PgBouncer in transaction mode
(`database_route`, docs/scale.md "Running behind PgBouncer")."""

import hashlib
import hmac
import json
import time

import pytest

from billing.usage import usage_record_current
from outreach.models.campaigns import Campaign, CampaignStep
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Enrollment, Message
from tests.outreach.factories import CampaignFactory, ContactFactory, EnrollmentFactory
from tests.outreach.helpers import assert_error
from tests.support.usage import usage_set
from webhooks.services import webhook_create

pytestmark = [pytest.mark.e2e]

WORKER_ENV = {
    "SENDING_SCHEDULE_INTERVAL_SECONDS": "0.5",
    "WEBHOOK_SWEEP_INTERVAL_SECONDS": "0.5",
}


def _verified_events(receiver, secret: str, count: int, timeout: float = 30.0) -> list[dict]:
    """The first `count` deliveries, each with a valid signature, as envelopes."""
    envelopes = []
    for request in receiver.wait_for(count, timeout=timeout):
        header = request.headers["X-Service-Signature"]
        parts = dict(item.split("=", 1) for item in header.split(","))
        expected = hmac.new(
            secret.encode(), f"{parts['t']}.".encode() + request.body, hashlib.sha256
        ).hexdigest()
        assert hmac.compare_digest(parts["v1"], expected)
        assert abs(time.time() - int(parts["t"])) < 300
        envelopes.append(json.loads(request.body))
    return envelopes


def _campaign_at(sink, account, *, steps: int) -> Campaign:
    campaign = CampaignFactory(account=account, with_steps=steps)
    CampaignStep.objects.filter(campaign=campaign).update(delay_minutes=0)
    SmtpCredential.objects.filter(pk=campaign.credentials.get().pk).update(
        smtp_host=sink.host, smtp_port=sink.port, smtp_security="none", smtp_username=""
    )
    return campaign


def _wait_until(predicate, *, timeout: float = 30.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise TimeoutError(f"timed out waiting for {what}")


@pytest.fixture(params=["direct", "pgbouncer"])
def database_route(request, live_db):
    """How the worker and this test process (whose API calls are the web's) reach the
    database: straight to PostgreSQL, or both through a real PgBouncer in transaction
    mode with the settings docs/scale.md prescribes for it (the migrations ran straight
    on PostgreSQL). Yields the worker's settings for it, and the PgBouncer (or None)."""
    if request.param == "direct":
        yield {}, None
        return
    bouncer = request.getfixturevalue("pgbouncer")
    with bouncer.routed():
        yield bouncer.env, bouncer


def _pooled_transactions(bouncer) -> int:
    """Transactions PgBouncer ran for the test database, as its admin console counts."""
    [stats] = [row for row in bouncer.show("STATS") if row[0] == bouncer.database]
    return stats[1]


def _dispatch(api_client, campaign, contacts):
    return api_client.post(
        f"/campaigns/{campaign.pk}/dispatch", {"contact_ids": [str(c.pk) for c in contacts]}
    )


def test_a_three_step_campaign_sends_three_emails_and_events_per_contact(
    database_route, account, api_client, smtp_sink, receiver, celery_worker
):
    database_env, bouncer = database_route
    sink = smtp_sink()
    secret = webhook_create(account=account, url=receiver.url, event_filters=["*"]).secret
    campaign = _campaign_at(sink, account, steps=3)
    contacts = [
        ContactFactory(account=account, email="ada@example.org", first_name="Ada"),
        ContactFactory(account=account, email="bob@example.org", first_name=""),
    ]
    for contact in contacts:
        EnrollmentFactory(campaign=campaign, contact=contact)
    # Two sends short of the free plan's cap: the dispatch passes, and steps 2 and 3
    # still go out after the cap is reached (a soft cap).
    record = usage_record_current(account=account)
    usage_set(record, account.plan.monthly_limit - 2)
    celery_worker(beat=True, env={**WORKER_ENV, **database_env})

    response = _dispatch(api_client, campaign, contacts)
    assert response.status_code == 200, response.content
    assert response.json()["dispatched"] == 2

    sink.wait_for(6, timeout=40)
    envelopes = _verified_events(receiver, secret, 6, timeout=40)

    assert {e["type"] for e in envelopes} == {"enrollment.sent"}
    for contact in contacts:
        mine = [e["data"] for e in envelopes if e["data"]["contact_id"] == str(contact.pk)]
        assert [d["status"] for d in mine] == ["sent", "sent", "completed"]
        assert {d["contact_email"] for d in mine} == {contact.email}
    ada = [m.message for m in sink.to("ada@example.org")]
    assert [m["Subject"] for m in ada] == ["Hello Ada 1", "Re: Hello Ada 1", "Re: Hello Ada 1"]
    assert [m.message["Subject"] for m in sink.to("bob@example.org")][0] == "Hello there 1"
    stored = list(
        Message.objects.filter(to_email="ada@example.org")
        .order_by("step")
        .values_list("message_id", flat=True)
    )
    assert [m["Message-ID"] for m in ada] == [f"<{i}>" for i in stored]
    assert ada[2]["In-Reply-To"] == f"<{stored[1]}>"
    assert ada[0]["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    assert "Step 2 for Acme" in ada[1].get_body(("plain",)).get_content()

    assert Enrollment.objects.filter(campaign=campaign, status="completed").count() == 2
    _wait_until(
        lambda: Campaign.objects.get(pk=campaign.pk).status == "completed",
        what="campaign completed",
    )
    assert usage_record_current(account=account).sends_count == account.plan.monthly_limit + 4
    newcomer = EnrollmentFactory(campaign=campaign)
    assert_error(_dispatch(api_client, campaign, [newcomer.contact]), 402, "plan_limit_reached")
    # Every message sent once, every event delivered once.
    assert len(sink.messages) == 6
    assert len({json.loads(r.body)["id"] for r in receiver.requests}) == len(receiver.requests)
    assert len(receiver.requests) == 6
    if bouncer is not None:  # the worker's and the API's transactions went through it
        assert _pooled_transactions(bouncer) > 50


def test_550s_disable_the_credential_and_pause_the_campaign_once(
    live_db, account, api_client, smtp_sink, receiver, celery_worker
):
    sink = smtp_sink()
    secret = webhook_create(account=account, url=receiver.url, event_filters=["*"]).secret
    campaign = _campaign_at(sink, account, steps=1)
    credential = campaign.credentials.get()
    good = [ContactFactory(account=account, email=f"ok{i}@example.org") for i in range(20)]
    bad = [ContactFactory(account=account, email=f"bad{i}@example.org") for i in range(3)]
    for contact in good + bad:
        EnrollmentFactory(campaign=campaign, contact=contact)
        if contact in bad:
            sink.reject_rcpt(contact.email, "550 5.1.1 User unknown")
    celery_worker(beat=True, env=WORKER_ENV)

    assert _dispatch(api_client, campaign, good).status_code == 200
    sink.wait_for(20, timeout=40)
    _verified_events(receiver, secret, 20, timeout=40)
    # 20 sends so far; two 550s make 2/22 = 9.1%, over the 5% threshold.
    assert _dispatch(api_client, campaign, bad[:2]).status_code == 200
    envelopes = _verified_events(receiver, secret, 24, timeout=40)
    time.sleep(1.5)  # three scheduler ticks: nothing more may arrive
    envelopes = _verified_events(receiver, secret, len(receiver.requests))

    types = [e["type"] for e in envelopes]
    assert types.count("enrollment.sent") == 20
    assert types.count("enrollment.bounced") == 2
    assert types.count("credential.disabled") == 1
    assert types.count("campaign.paused") == 1
    [disabled] = [e["data"] for e in envelopes if e["type"] == "credential.disabled"]
    assert disabled == {
        "credential_id": str(credential.pk),
        "from_email": credential.from_email,
        "campaign_id": str(campaign.pk),
        "bounce_rate": 9.09,
        "threshold": 5.0,
    }
    [paused] = [e["data"] for e in envelopes if e["type"] == "campaign.paused"]
    assert paused == {
        "campaign_id": str(campaign.pk),
        "name": campaign.name,
        "reason": "all_credentials_disabled",
    }
    bounced = [e["data"] for e in envelopes if e["type"] == "enrollment.bounced"]
    assert {b["bounce_reason"] for b in bounced} == {"550 5.1.1 User unknown"}
    campaign.refresh_from_db()
    assert (campaign.status, campaign.paused_reason) == ("paused", "all_credentials_disabled")

    assert len(sink.messages) == 20
    # Without an enabled mailbox the campaign cannot be dispatched again.
    assert_error(_dispatch(api_client, campaign, bad[2:]), 409, "campaign_not_dispatchable")


def test_a_worker_killed_mid_batch_sends_nothing_twice(
    live_db, account, api_client, smtp_sink, celery_worker
):
    sink = smtp_sink()
    campaign = _campaign_at(sink, account, steps=1)
    contacts = [ContactFactory(account=account, email=f"c{i}@example.org") for i in range(6)]
    for contact in contacts:
        EnrollmentFactory(campaign=campaign, contact=contact)
    held = contacts[3]
    sink.hold_data(held.email)  # the server takes the message and never answers
    env = {**WORKER_ENV, "SENDING_LEASE_SECONDS": "3"}
    worker = celery_worker(beat=True, env=env)

    assert _dispatch(api_client, campaign, contacts).status_code == 200
    _wait_until(lambda: sink.to(held.email), what="the held message")
    worker.kill()  # mid-batch, with the held message in flight
    sink.release()
    celery_worker(beat=True, env=env)

    _wait_until(
        lambda: (
            not Enrollment.objects.filter(
                campaign=campaign, status__in=Enrollment.ACTIVE_STATUSES
            ).exists()
        ),
        timeout=40,
        what="every enrollment settled",
    )
    for contact in contacts:
        assert len(sink.to(contact.email)) == 1, contact.email
    # The held one's outcome is unknown: counted as sent, reply unseen, never resent.
    unknown = Enrollment.objects.get(campaign=campaign, contact=held)
    assert unknown.status == "completed" and "never seen" in unknown.last_error
    assert Enrollment.objects.filter(campaign=campaign, status="completed").count() == 6
    messages = Message.objects.filter(enrollment__campaign=campaign)
    assert messages.count() == 6
    assert [m.to_email for m in messages.filter(reply_seen=False)] == [held.email]


def test_a_task_of_several_mailboxes_sends_them_all_over_a_one_connection_database_pool(
    live_db, account, smtp_sink, celery_worker
):
    """A sending task hands its mailboxes to the worker's sending threads and waits for
    them: while it waits it holds no database connection, or a worker whose pool is
    smaller than its waiting tasks would starve its own sending threads. Here the pool
    has one connection (no beat: nothing else takes it) and the task four mailboxes."""
    from django.utils import timezone

    from outreach.sending.scheduler import schedule_due
    from tests.support.celery_worker import send_task

    sink = smtp_sink()
    campaign = _campaign_at(sink, account, steps=1)
    first = campaign.credentials.get()
    for n in range(3):  # four mailboxes in rotation
        first.pk, first.from_email = None, f"rotation{n}@example.com"
        first._state.adding = True
        first.save()
        campaign.credentials.add(first)
    for n in range(8):
        EnrollmentFactory(
            campaign=campaign,
            contact=ContactFactory(account=account, email=f"c{n}@example.org"),
            status=Enrollment.Status.SCHEDULED,
            next_send_at=timezone.now(),
        )
    Campaign.objects.filter(pk=campaign.pk).update(status=Campaign.Status.ACTIVE)
    batches = schedule_due()
    assert len({b.credential_id for b in batches}) == 4
    worker = celery_worker(env={"DB_POOL_MAX_SIZE": "1", "DB_POOL_TIMEOUT_SECONDS": "5"})

    send_task(
        "outreach.tasks.send_mailboxes",
        [[str(b.credential_id), [str(b.batch_id)]] for b in batches],
    )

    sink.wait_for(8, timeout=40)
    _wait_until(lambda: Message.objects.filter(enrollment__campaign=campaign).count() == 8)
    assert len({m.mail_from for m in sink.messages}) == 4
    assert "couldn't get a connection" not in worker.log
