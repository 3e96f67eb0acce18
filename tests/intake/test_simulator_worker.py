"""The simulator's outcomes with a real Celery worker: the task queued by its name, as
the send queues it, is run from the intake queue; and an outcome whose task was lost is
made by beat's sweep."""

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from outreach.models.conversations import Reply
from outreach.models.sending import SendClaim
from tests.intake.simulator import simulated_send
from tests.support.celery_worker import send_task

pytestmark = [pytest.mark.e2e]


def reply_kept(enrollment, timeout: float = 30.0) -> Reply | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reply = Reply.objects.filter(enrollment=enrollment).first()
        if reply is not None:
            return reply
        time.sleep(0.2)
    return None


def test_the_task_queued_by_name_runs_on_the_intake_queue(live_db, celery_worker):
    enrollment, message, _ = simulated_send("reply")
    worker = celery_worker(queues="intake", name="intake")

    send_task("outreach.simulator_outcome", str(message.pk))

    assert reply_kept(enrollment) is not None, worker.log[-3000:]
    enrollment.refresh_from_db()
    assert enrollment.status == "replied"


def test_an_outcome_whose_task_was_lost_is_made_by_the_sweep(live_db, celery_worker):
    enrollment, message, _ = simulated_send("ooo")
    now = timezone.now()
    SendClaim.objects.create(
        enrollment_id=message.enrollment_id,
        batch_id=message.pk,
        credential_id=message.credential_id,
        step=1,
        claimed_at=now - timedelta(seconds=30),
        lease_until=now,
        sending_at=now - timedelta(seconds=30),
        finished_at=now - timedelta(seconds=20),
        outcome=SendClaim.Outcome.SENT,
        message_id=message.message_id,
        to_email=message.to_email,
    )
    # Nothing was queued for it: only beat's sweep can find it.
    worker = celery_worker(beat=True, env={"SIMULATOR_DELAY_SECONDS": "1"})

    reply = reply_kept(enrollment)
    assert reply is not None, worker.log[-3000:]
    assert reply.label == "out_of_office"
