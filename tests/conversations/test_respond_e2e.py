"""Responding end to end: a real Celery worker sending the response to a real SMTP
server, and a worker killed (SIGKILL) while the server holds the response, whose send
the next worker's beat records once and never repeats."""

import time

import pytest

from outreach.models.conversations import ReplyResponse
from tests.conversations.test_respond import ADA, _reply, _respond
from tests.e2e.test_sending_e2e import _wait_until

pytestmark = [pytest.mark.e2e]


def _status(response_id) -> str:
    return ReplyResponse.objects.values_list("status", flat=True).get(pk=response_id)


def test_a_worker_sends_the_response(live_db, account, api_client, smtp_sink, celery_worker):
    sink = smtp_sink()
    reply = _reply(account, sink)
    celery_worker()

    answer = _respond(api_client, reply)

    assert answer.status_code == 201
    response_id = answer.json()["id"]
    _wait_until(lambda: _status(response_id) == "sent", what="the response sent")
    [received] = sink.to(ADA)
    assert received.message["In-Reply-To"] == f"<{reply.message_id}>"
    assert ReplyResponse.objects.get(pk=response_id).reply_seen is True


def test_a_worker_killed_while_the_server_holds_the_response_sends_it_once(
    live_db, account, api_client, smtp_sink, celery_worker
):
    sink = smtp_sink()
    reply = _reply(account, sink)
    sink.hold_data(ADA)  # the server takes the message and never answers
    env = {"SENDING_SCHEDULE_INTERVAL_SECONDS": "0.5", "SENDING_LEASE_SECONDS": "3"}
    worker = celery_worker(beat=True, env=env)

    response_id = _respond(api_client, reply).json()["id"]
    _wait_until(lambda: sink.to(ADA), what="the held message")
    worker.kill()  # mid-transaction: the response is marked, its outcome unknown
    sink.release()
    celery_worker(beat=True, env=env)

    _wait_until(lambda: _status(response_id) != "queued", timeout=40, what="the recovery")
    response = ReplyResponse.objects.get(pk=response_id)
    assert (response.status, response.reply_seen) == ("sent", False)
    time.sleep(2)  # several more beat runs: nothing is sent again
    assert len(sink.to(ADA)) == 1
