"""End to end, with a real Celery worker, Redis and PostgreSQL: nothing emitted
is lost when the broker is down at emit time or a worker dies mid-delivery."""

import json
import os
import subprocess
import sys
import time

import pytest
import stripe

from tests.support.celery_worker import ROOT
from tests.support.database import live_database_url
from tests.support.ports import free_port
from tests.support.receiver import Reply
from tests.webhooks.factories import WebhookFactory
from webhooks.answers import LOST_ATTEMPT_ERROR
from webhooks.models import DeliveryJob, WebhookDelivery

pytestmark = [
    pytest.mark.synthetic_events,  # made-up payloads (tests/support/event_schemas.py)
    pytest.mark.e2e,
    pytest.mark.django_db(transaction=True),
]

FAST_SWEEP = {"WEBHOOK_SWEEP_INTERVAL_SECONDS": "0.5", "WEBHOOK_CLAIM_LEASE_SECONDS": "2"}


def emit_from_another_process(account_id, *, broker_url: str | None = None) -> None:
    """A producer process (a web or sending worker) emitting one event in a
    transaction, with a real (non-eager) Celery client."""
    code = (
        "import django; django.setup();"
        "from django.db import transaction;"
        "from webhooks.events import event_emit as emit;"
        "import os;"
        "transaction.atomic()(lambda: emit(os.environ['EMIT_ACCOUNT_ID'], 'campaign.paused',"
        " {'campaign_id': 'c1', 'name': 'Q4', 'reason': 'all_credentials_disabled'}))()"
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings_test",
        "DATABASE_URL": live_database_url(),
        "CELERY_TASK_ALWAYS_EAGER": "false",
        "EMIT_ACCOUNT_ID": str(account_id),
    }
    if broker_url:
        env["CELERY_BROKER_URL"] = broker_url
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr


def wait_until(predicate, *, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise TimeoutError("condition not met in time")


def test_an_event_emitted_while_the_broker_is_down_is_delivered_once_it_is_back(
    account, receiver, celery_worker
):
    webhook = WebhookFactory(account=account, url=receiver.url)

    # The broker is unreachable: the emit still commits, the enqueue fails quietly.
    emit_from_another_process(account.id, broker_url=f"redis://127.0.0.1:{free_port()}/0")
    job = DeliveryJob.objects.get()
    assert job.state == "pending"
    webhook.refresh_from_db()
    assert webhook.drain_enqueued_at is None  # the ring failed; nothing is on its way

    celery_worker(beat=True, env=FAST_SWEEP)  # the broker is back, with beat's sweep

    (request,) = receiver.wait_for(1, timeout=30)
    assert json.loads(request.body)["id"] == str(job.id)
    assert stripe.WebhookSignature.verify_header(
        request.body.decode(), request.headers["X-Service-Signature"], webhook.secret, tolerance=300
    )
    wait_until(lambda: DeliveryJob.objects.get().state == "succeeded")
    assert [r.status_code for r in WebhookDelivery.objects.all()] == [200]


def test_a_worker_killed_during_a_delivery_does_not_lose_it(account, receiver, celery_worker):
    webhook = WebhookFactory(account=account, url=receiver.url)
    receiver.script(Reply(200, hold=True))  # the first attempt hangs
    first = celery_worker(env=FAST_SWEEP)

    emit_from_another_process(account.id)  # the fast path, through Redis
    (held,) = receiver.wait_for(1, timeout=30)
    assert DeliveryJob.objects.get().state == "delivering"
    first.kill()  # SIGKILL, worker and pool, mid-request

    celery_worker(beat=True, env=FAST_SWEEP)  # after the lease, the sweep re-claims it

    _, retried = receiver.wait_for(2, timeout=30)
    assert json.loads(retried.body)["id"] == json.loads(held.body)["id"]  # same delivery id
    wait_until(lambda: DeliveryJob.objects.get().state == "succeeded")
    attempts = list(WebhookDelivery.objects.filter(webhook=webhook).order_by("attempt"))
    assert [(r.attempt, r.status_code, r.error) for r in attempts] == [
        (1, None, LOST_ATTEMPT_ERROR),
        (2, 200, None),
    ]
    receiver.release()
