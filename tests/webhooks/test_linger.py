"""A drain that runs out of jobs waits a moment for new ones (WEBHOOK_DRAIN_LINGER_SECONDS)
before it leaves, and an event that comes while it waits or leaves is never stranded.
Real threads on PostgreSQL: the drain in one, the producers in others."""

import json
import threading

import pytest
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from config.worker import stopping
from tests.support.receiver import Reply
from tests.webhooks.factories import WebhookFactory
from tests.webhooks.test_e2e_delivery import wait_until
from webhooks import delivery, events
from webhooks.delivery import webhook_drain
from webhooks.events import drains_enqueue, event_emit
from webhooks.models import DeliveryJob, Webhook

pytestmark = [
    pytest.mark.synthetic_events,  # made-up payloads (tests/support/event_schemas.py)
    pytest.mark.usefixtures("live_db"),
]


def emit_committed(account, n: int) -> None:
    """An event committed by another connection, its drain rung after the commit (eager
    Celery: the drain task runs right there, and finds the lease held)."""

    def run():
        try:
            with transaction.atomic():
                event_emit(account=account, event_type="enrollment.sent", data={"n": n})
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()


class Drain(threading.Thread):
    """webhook_drain in a thread of its own, as a worker runs it; `statements`: the SQL
    it ran."""

    def __init__(self, webhook, **kwargs):
        super().__init__()
        self.webhook, self.kwargs, self.worked = webhook, kwargs, None
        self.statements: list[str] = []

    def run(self):
        try:
            with CaptureQueriesContext(connection) as queries:
                self.worked = webhook_drain(webhook_id=self.webhook.id, **self.kwargs)
            self.statements = [query["sql"] for query in queries.captured_queries]
        finally:
            connections.close_all()


def sent_numbers(receiver) -> list[int]:
    return [json.loads(r.body)["data"]["n"] for r in receiver.requests]


def test_a_trickle_of_events_is_delivered_by_one_drain(account, receiver):
    webhook = WebhookFactory(account=account, url=receiver.url)
    emit_committed(account, 1)  # its ring ran its drain (eager) at once
    assert sent_numbers(receiver) == [1]

    drain = Drain(webhook, linger=30)
    drain.start()  # nothing to do: it waits
    wait_until(lambda: Webhook.objects.get().drain_token)
    # The next events are the waiting drain's (their rings find its lease), not new drains'.
    for n in (2, 3, 4):
        emit_committed(account, n)
        receiver.wait_for(n)
    assert Webhook.objects.get().drain_token is not None  # still held: waiting for more
    stopping.set()  # a warm shutdown ends the wait at once
    try:
        drain.join(timeout=10)
    finally:
        stopping.clear()
    assert not drain.is_alive()
    assert drain.worked == 3  # events 2, 3 and 4, one drain
    # Each event its claim and its record; besides, the lease taken, the failing attempts
    # looked for, the first claim (nothing due yet, unless event 2 was already), the lease
    # given back and the look once more.
    assert len(drain.statements) <= 3 * 2 + 5, drain.statements
    assert sorted(sent_numbers(receiver)) == [1, 2, 3, 4]
    assert set(DeliveryJob.objects.values_list("state", flat=True)) == {"succeeded"}
    assert Webhook.objects.get().drain_token is None  # the lease given back


def test_a_drain_with_nothing_to_do_leaves_after_its_moment(account, receiver):
    webhook = WebhookFactory(account=account, url=receiver.url)
    emit_committed(account, 1)
    drain = Drain(webhook, linger=0.2)
    drain.start()
    drain.join(timeout=10)
    assert not drain.is_alive() and drain.worked == 0
    webhook.refresh_from_db()
    assert (webhook.drain_token, webhook.drain_until) == (None, None)


def test_an_event_committed_as_the_drain_leaves_is_delivered(account, receiver, monkeypatch):
    """The race: the drain finds nothing left, an event commits and rings after its
    commit (as the sweep and redeliveries do), the ring sees the lease still held and
    sends no drain, the drain gives its lease back. The drain looks once more after
    that, so the event does not wait for the next sweep."""
    WebhookFactory(account=account, url=receiver.url)
    leave = delivery._lease_leave
    rung = []

    def leave_after_an_event(webhook_id, token):
        if not rung:
            rung.append(True)
            job = DeliveryJob.objects.get()
            DeliveryJob.objects.filter(pk=job.pk).update(
                state="pending", next_attempt_at=timezone.now()
            )  # due again, committed: as a redelivery makes it
            assert drains_enqueue(webhook_ids=[str(job.webhook_id)]) == 0  # the lease is held
        return leave(webhook_id, token)

    monkeypatch.setattr(delivery, "_lease_leave", leave_after_an_event)
    emit_committed(account, 1)  # its drain delivers 1, and 1 again as it leaves
    assert rung
    assert sent_numbers(receiver) == [1, 1]
    assert DeliveryJob.objects.get().state == "succeeded"


def test_an_event_still_uncommitted_when_the_drain_would_leave_is_its_own(
    account, receiver, monkeypatch
):
    """A producer rings inside its transaction: finding the lease held, it sends no
    drain and counts on this one. The drain does not leave until that transaction has
    ended, then delivers what it committed."""
    webhook = WebhookFactory(account=account, url=receiver.url)
    rang, commit = threading.Event(), threading.Event()
    committed = []
    leave, leaves = delivery._lease_leave, []

    def leave_counted(webhook_id, token):
        leaves.append(leave(webhook_id, token))
        return leaves[-1]

    def producer():
        try:
            with transaction.atomic():
                transaction.on_commit(lambda: committed.append(True))
                event_emit(account=account, event_type="enrollment.sent", data={"n": 1})
                rang.set()
                commit.wait(timeout=30)
        finally:
            connections.close_all()

    monkeypatch.setattr(delivery, "_lease_leave", leave_counted)
    with monkeypatch.context() as patch:
        patch.setattr(events, "drains_publish", lambda **kwargs: 0)
        emit_committed(account, 0)  # no drain message: the drain below takes it
    receiver.script(Reply(200, hold=True))  # the drain holds its lease meanwhile
    drain = Drain(webhook, linger=0.1)
    drain.start()
    receiver.wait_for(1)
    thread = threading.Thread(target=producer)
    thread.start()
    rang.wait(timeout=10)
    assert Webhook.objects.get().drain_enqueued_at is None  # the lease was held: no mark
    receiver.release()
    # Its request answered and its moment of waiting past, the drain tries to leave, and
    # may not while the producer's transaction is open.
    wait_until(lambda: leaves.count(False) >= 2)
    assert drain.is_alive() and Webhook.objects.get().drain_token is not None
    commit.set()
    thread.join()
    drain.join(timeout=10)
    assert not drain.is_alive() and committed
    assert drain.worked == 2 and sent_numbers(receiver) == [0, 1]
    assert set(DeliveryJob.objects.values_list("state", flat=True)) == {"succeeded"}
    assert Webhook.objects.get().drain_token is None
    assert leaves[-1] is True


def test_the_watch_wakes_a_waiting_drain_and_forgets_one_that_stopped_waiting(account, monkeypatch):
    from webhooks.watch import Watch

    webhook = WebhookFactory(account=account)
    watch = Watch()
    watch.watch(webhook.id).cancel()  # a drain that stopped waiting
    wait_until(lambda: not watch._waiting and watch._thread is None)  # forgotten

    waiting = watch.watch(webhook.id)
    monkeypatch.setattr(events, "drains_publish", lambda **kwargs: 0)  # no drain takes it
    emit_committed(account, 1)
    assert waiting.result(timeout=10) is True  # woken: a job of its webhook is due
    wait_until(lambda: not watch._waiting and watch._thread is None)
