"""Every queue is declared in the Celery configuration, so `celery -A config worker`
(no -Q, as Celery's documentation writes it) consumes all of them."""

import time
import uuid

import pytest
from django.conf import settings

from config.celery import app
from tests.support.celery_worker import send_task


def _declared() -> set[str]:
    return {queue.name for queue in settings.CELERY_TASK_QUEUES}


def test_it_declares_every_queue_a_task_is_routed_to():
    routed = {route["queue"] for route in settings.CELERY_TASK_ROUTES.values()}
    assert routed | {settings.CELERY_TASK_DEFAULT_QUEUE} <= _declared()
    assert _declared() == {"celery", "webhooks", "sending", "imports", "intake"}


def test_it_routes_every_task_of_the_project_to_a_declared_queue():
    app.loader.import_default_modules()
    names = [name for name in app.tasks if not name.startswith("celery.")]
    assert len(names) >= 10
    for name in names:
        queue = app.amqp.router.route({}, name)["queue"]
        assert queue.name in _declared(), name


def test_a_worker_without_q_consumes_every_declared_queue():
    assert set(app.amqp.queues) == _declared()


# One task per queue, each harmless when run with nothing to do.
TASK_PER_QUEUE = {
    "celery": ("accounts.tasks.idempotency_prune", ()),
    "webhooks": ("webhooks.tasks.webhook_sweep", ()),
    "sending": ("outreach.tasks.send_mailboxes", ([[str(uuid.uuid4()), [str(uuid.uuid4())]]],)),
    "imports": ("outreach.tasks.import_redrive_stale", ()),
    "intake": ("outreach.tasks.intake_poll_mailboxes", ()),
}


def test_a_plain_worker_runs_a_task_from_each_queue(celery_worker, live_db):
    assert set(TASK_PER_QUEUE) == _declared()
    # DEBUG: idle periodic tasks log at DEBUG (config.logs), these among them.
    worker = celery_worker(env={"LOG_LEVEL": "DEBUG"})
    for name, args in TASK_PER_QUEUE.values():
        send_task(name, *args)
    deadline = time.monotonic() + 30
    missing = list(TASK_PER_QUEUE.values())
    while missing and time.monotonic() < deadline:
        log = worker.log
        missing = [(name, args) for name, args in missing if f"Task {name}[" not in log]
        time.sleep(0.2)
    assert missing == [], worker.log[-3000:]
    for queue in _declared():
        assert f".> {queue} " in worker.log  # the worker's banner lists what it consumes


pytestmark = pytest.mark.django_db
