"""Two beats, the production layout (docs/scale.md, "Two beats"): two real `celery beat`
processes tick the same schedule beside one real worker, against PostgreSQL, Redis, an
SMTP sink and a webhook receiver. Both send every periodic task; what keeps the work
single is the database (the scheduler's run lock, the claims, the delivery leases), so
either beat may die. One is SIGKILLed while messages are going out and webhook
deliveries are failing: the sends and the retries go on, driven by the other, and
nothing is sent or delivered twice."""

import json
import time
from collections import Counter

import pytest

from tests.e2e.test_sending_e2e import _campaign_at, _dispatch
from tests.outreach.factories import ContactFactory, EnrollmentFactory
from webhooks.services import webhook_create

pytestmark = [pytest.mark.e2e]

ENV = {
    "SENDING_SCHEDULE_INTERVAL_SECONDS": "0.5",
    "WEBHOOK_SWEEP_INTERVAL_SECONDS": "0.5",
    # A failed delivery is tried again 3 s later, by a sweep: a drain leaves at once
    # when it runs out of due jobs, so only a beat rings the retry.
    "WEBHOOK_RETRY_SCHEDULE": "3,3,3,3",
    "WEBHOOK_DRAIN_LINGER_SECONDS": "0",
}


def _event_id(request) -> str:
    return json.loads(request.body)["id"]


def test_the_other_beat_carries_on_when_one_is_killed(
    live_db, account, api_client, smtp_sink, receiver, celery_worker, celery_beat
):
    sink = smtp_sink()
    webhook_create(account=account, url=receiver.url, event_filters=["enrollment.sent"])
    campaign = _campaign_at(sink, account, steps=1)
    first = [ContactFactory(account=account, email=f"first{i}@example.org") for i in range(4)]
    then = [ContactFactory(account=account, email=f"then{i}@example.org") for i in range(4)]
    for contact in first + then:
        EnrollmentFactory(campaign=campaign, contact=contact)
    # Every event's first attempt fails: each needs a retry.
    receiver.script(*[500] * len(first))
    # Started together: each process's start (Django, every app) takes seconds.
    doomed, survivor = celery_beat(env=ENV, wait=False), celery_beat(env=ENV, wait=False)
    celery_worker(env=ENV)
    doomed.wait_ready(), survivor.wait_ready()

    assert _dispatch(api_client, campaign, first).status_code == 200
    sink.wait_for(len(first), timeout=60)
    receiver.wait_for(len(first), timeout=60)
    doomed.kill()  # SIGKILL, mid-flow: retries are due in 3 s
    before_kill = len(receiver.requests)

    # Within a minute the survivor's sweeps ring every retry (nothing else can: no event
    # came since, no drain lingers, and a dead beat's queued tick expires in 0.5 s)...
    receiver.wait_for(2 * len(first), timeout=60)
    # ... and its scheduler's runs send what is dispatched now.
    assert _dispatch(api_client, campaign, then).status_code == 200
    everyone = first + then
    sink.wait_for(len(everyone), timeout=60)
    receiver.wait_for(len(first) + len(everyone), timeout=60)
    time.sleep(2)  # four sweeps and scheduler runs more: nothing may be sent again

    messages, requests = sink.messages, receiver.requests
    message_ids = Counter(m.message["Message-ID"] for m in messages)
    assert len(messages) == len(everyone)
    assert max(message_ids.values()) == 1
    recipients = sorted(address for m in messages for address in m.rcpt_tos)
    assert recipients == sorted(c.email for c in everyone)

    failed, answered = requests[: len(first)], requests[len(first) :]
    delivered = Counter(_event_id(r) for r in answered)  # every one of these got a 200
    assert len(delivered) == len(everyone)
    assert max(delivered.values()) == 1
    assert {_event_id(r) for r in failed} <= set(delivered)
    # Retries were made after the kill: failed events delivered by the survivor's sweeps.
    assert {_event_id(r) for r in requests[before_kill:]} & {_event_id(r) for r in failed}
