"""The delivery engine under latency and faults: lanes per webhook, a slow or hanging
endpoint costing only its own slots, a dead endpoint disabled within its budget, and a
worker killed again and again losing no event and failing none unsent."""

import json
import time
from collections import Counter

import pytest
from django.db import transaction

from tests.support.receiver import Reply
from tests.webhooks.factories import WebhookFactory
from tests.webhooks.test_e2e_delivery import wait_until
from webhooks import events
from webhooks.answers import LOST_ATTEMPT_ERROR
from webhooks.delivery import webhook_drain
from webhooks.events import event_emit
from webhooks.models import DeliveryJob, Webhook, WebhookDelivery

pytestmark = pytest.mark.synthetic_events  # made-up payloads (tests/support/event_schemas.py)

DATA = {"enrollment_id": "e1", "contact_email": "ann@example.com", "status": "sent"}
# Fast sweeps and a short claim lease, so a killed worker's requests come back quickly.
FAST = {
    "WEBHOOK_SWEEP_INTERVAL_SECONDS": "0.3",
    "WEBHOOK_CLAIM_LEASE_SECONDS": "2",
    "WEBHOOK_TIMEOUT_SECONDS": "30",
}


def emit_quietly(account, count: int, monkeypatch) -> None:
    """Commit `count` events without ringing a drain from this (eager) process: the
    worker's beat sweep finds them, as it finds any job the fast path missed (here, the
    broker refused the drain messages)."""
    from webhooks.tasks import webhook_drain as task

    def broker_down(*args, **kwargs):
        raise ConnectionRefusedError("broker down")

    with monkeypatch.context() as patch:
        patch.setattr(task, "apply_async", broker_down)
        for n in range(count):
            with transaction.atomic():
                event_emit(account=account, event_type="enrollment.sent", data={**DATA, "n": n})


def envelope_ids(requests) -> list[str]:
    return [json.loads(r.body)["id"] for r in requests]


@pytest.mark.django_db
def test_a_dead_endpoint_is_disabled_after_five_deliveries_of_five_attempts(
    account, receiver, settings
):
    settings.WEBHOOK_RETRY_SCHEDULE = [0, 0, 0, 0]
    receiver.default = Reply(503)
    webhook = WebhookFactory(account=account, url=receiver.url)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(events, "drains_publish", lambda **kwargs: 0)
        for _ in range(30):
            event_emit(account=account, event_type="enrollment.sent", data=DATA)

    webhook_drain(webhook_id=webhook.id)

    assert len(receiver.requests) == 25  # 5 deliveries x 5 attempts, not 30 x 5
    webhook.refresh_from_db()
    assert webhook.disabled_at is not None and webhook.consecutive_failures == 5
    assert Counter(DeliveryJob.objects.values_list("state", flat=True)) == {
        "failed": 5,
        "dropped": 25,
    }
    assert WebhookDelivery.objects.count() == 25


def live(test):
    """With a real worker (threads, as the Procfile runs it), PostgreSQL and Redis."""
    for mark in (pytest.mark.e2e, pytest.mark.django_db(transaction=True)):
        test = mark(test)
    return test


@live
def test_one_webhook_has_at_most_its_lanes_in_flight(account, receiver, celery_worker, monkeypatch):
    receiver.default = Reply(200, hold=True)
    WebhookFactory(account=account, url=receiver.url)
    emit_quietly(account, 10, monkeypatch)
    # A claim lease longer than the hold: only the lanes limit what goes out.
    celery_worker(
        beat=True,
        env={**FAST, "WEBHOOK_MAX_IN_FLIGHT": "4", "WEBHOOK_CLAIM_LEASE_SECONDS": "60"},
    )

    receiver.wait_for(4, timeout=30)
    time.sleep(1.0)  # had a fifth request been allowed, it would be here by now
    assert len(receiver.requests) == 4
    receiver.release()
    wait_until(lambda: DeliveryJob.objects.filter(state="succeeded").count() == 10, timeout=60)
    assert sorted(Counter(envelope_ids(receiver.requests)).values()) == [1] * 10


@live
def test_a_hanging_endpoint_delays_only_itself(account, receiver, celery_worker, monkeypatch):
    from tests.accounts.factories import AccountFactory
    from tests.support.receiver import Receiver

    hanging = Receiver().start()
    hanging.default = Reply(200, hold=True)
    try:
        other = AccountFactory()
        WebhookFactory(account=other, url=hanging.url)
        healthy = WebhookFactory(account=account, url=receiver.url)
        receiver.default = Reply(200, delay=0.1)
        emit_quietly(other, 20, monkeypatch)
        emit_quietly(account, 20, monkeypatch)
        celery_worker(beat=True, env=FAST)

        # Every healthy delivery arrives while the other endpoint holds its lanes.
        receiver.wait_for(20, timeout=30)
        wait_until(
            lambda: DeliveryJob.objects.filter(webhook=healthy, state="succeeded").count() == 20,
            timeout=60,
        )
        assert len(hanging.requests) <= 4
    finally:
        hanging.release()
        hanging.stop()


@live
@pytest.mark.filterwarnings("ignore::celery.exceptions.AlwaysEagerIgnored")  # on purpose
def test_an_account_s_fifty_hanging_endpoints_leave_room_for_another_account(
    account, receiver, celery_worker, monkeypatch
):
    from celery import current_app

    from tests.accounts.factories import AccountFactory
    from tests.support.receiver import Receiver

    hanging = Receiver(hang=True).start()  # reads each request, never answers
    try:
        greedy = AccountFactory()
        greedy_hooks = [str(WebhookFactory(account=greedy, url=hanging.url).id) for _ in range(50)]
        other = WebhookFactory(account=account, url=receiver.url)
        emit_quietly(greedy, 1, monkeypatch)  # one delivery for each of its 50 webhooks
        emit_quietly(account, 1, monkeypatch)
        # 8 threads, as many as a worker has for drains; the greedy account may run 3.
        celery_worker(concurrency=8, env={**FAST, "WEBHOOK_ACCOUNT_MAX_DRAINS": "3"})

        for webhook_id in greedy_hooks:  # its 50 drains queued first, on the broker
            current_app.send_task(events.DRAIN_TASK, args=[webhook_id])
        hanging.wait_for(3, timeout=30)
        current_app.send_task(events.DRAIN_TASK, args=[str(other.id)])

        # Delivered while the 50 endpoints hang (before, the greedy drains held all 8
        # threads, each for its 30 s timeout, and this one waited behind 42 more).
        (request,) = receiver.wait_for(1, timeout=20)
        assert json.loads(request.body)["account_id"] == str(account.id)
        wait_until(
            lambda: DeliveryJob.objects.filter(webhook=other, state="succeeded").exists(),
            timeout=10,
        )
        assert len(hanging.requests) <= 3
    finally:
        hanging.stop()


@live
def test_a_worker_killed_five_times_fails_nothing_unsent_and_loses_nothing(
    account, receiver, celery_worker, monkeypatch
):
    receiver.default = Reply(200, hold=True)
    webhook = WebhookFactory(account=account, url=receiver.url)
    emit_quietly(account, 20, monkeypatch)

    kills = 0
    seen = 0
    for _kill in range(5):
        worker = celery_worker(beat=True, env=FAST)
        wait_until(lambda s=seen: len(receiver.requests) >= s + 1, timeout=30)
        time.sleep(0.3)  # let the lanes fill
        seen = len(receiver.requests)
        worker.kill()
        kills += 1
    receiver.release()
    celery_worker(beat=True, env=FAST)
    wait_until(lambda: DeliveryJob.objects.filter(state="succeeded").count() == 20, timeout=90)

    webhook.refresh_from_db()
    assert webhook.disabled_at is None and webhook.consecutive_failures == 0
    assert not DeliveryJob.objects.filter(state="failed").exists()
    counts = Counter(envelope_ids(receiver.requests))
    assert set(counts) == {str(pk) for pk in DeliveryJob.objects.values_list("id", flat=True)}
    duplicates = sum(n - 1 for n in counts.values())
    # Only requests in flight at a kill are made again: at most the lanes, per kill.
    assert duplicates <= kills * 4
    lost = WebhookDelivery.objects.filter(error=LOST_ATTEMPT_ERROR).count()
    assert lost == duplicates
    # The last drain lets go (once its moment of waiting for more has passed).
    wait_until(lambda: Webhook.objects.get().drain_token is None, timeout=10)
