"""Branches through the real stack: a Celery worker running beat (the scheduler, with its
deadline scan, every half second), an SMTP sink, the open pixel as a mail client loads
it, and a receiver of the opt-in enrollment.branched events."""

import json
import re
import time

import pytest
from django.test import Client
from django.utils import timezone

from outreach.models.sending import Enrollment
from tests.outreach.branching import branch, email, enrolled, graph_campaign
from webhooks.services import webhook_create

pytestmark = [pytest.mark.e2e]

WORKER_ENV = {
    "SENDING_SCHEDULE_INTERVAL_SECONDS": "0.5",
    "WEBHOOK_SWEEP_INTERVAL_SECONDS": "0.5",
}


def _wait_until(predicate, *, timeout: float = 40.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise TimeoutError(f"timed out waiting for {what}")


def test_an_open_sends_then_and_a_passed_deadline_sends_else(
    live_db, account, smtp_sink, receiver, celery_worker
):
    sink = smtp_sink()
    webhook_create(account=account, url=receiver.url, event_filters=["enrollment.branched"])
    elements = [
        email("intro", "wait"),
        branch("wait", of="intro", then="case_study", else_="bump"),
        email("case_study", "end", subject="The case study"),
        email("bump", "end", subject="Just checking"),
    ]
    campaign = graph_campaign(sink, elements, account=account)
    opener = enrolled(campaign, email="ada@example.org")
    silent = enrolled(campaign, email="bob@example.org")
    celery_worker(beat=True, env=WORKER_ENV)

    sink.wait_for(2)
    _wait_until(
        lambda: (
            Enrollment.objects.filter(current_key="wait", branch_deadline__isnull=False).count()
            == 2
        ),
        what="both waiting at the branch",
    )
    # Ada's mail client loads the pixel of the intro as it was sent.
    [intro] = sink.to("ada@example.org")
    html = intro.message.get_body(("html",)).get_content()
    [pixel] = re.findall(r'background="http://[^"]+(/t/o/[^"]+\.gif)"', html)
    assert Client().get(pixel).status_code == 200
    # Bob's deadline passes (moved to now rather than waited for a day).
    Enrollment.objects.filter(pk=silent.pk).update(branch_deadline=timezone.now())

    sink.wait_for(4)
    assert [m.message["Subject"] for m in sink.to("ada@example.org")][1] == "The case study"
    assert [m.message["Subject"] for m in sink.to("bob@example.org")][1] == "Just checking"
    events = [json.loads(r.body) for r in receiver.wait_for(2)]
    assert {(e["data"]["contact_email"], e["data"]["outcome"]) for e in events} == {
        ("ada@example.org", "then"),
        ("bob@example.org", "else"),
    }
    _wait_until(
        lambda: Enrollment.objects.filter(campaign=campaign, status="completed").count() == 2,
        what="both completed",
    )
    opener.refresh_from_db()
    assert opener.path == ["intro", "wait", "case_study"]
