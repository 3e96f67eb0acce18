"""A branch is decided once: an event and the deadline racing (two connections), two
deadline runs at once, and a process killed with SIGKILL between its decisions and
their commit (the decisions are lost with it, and made once by the next run)."""

import os
import signal
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone

from outreach.campaigns.branch_moves import branch_deadlines_decide, branch_decide
from outreach.models.branches import BranchDecision
from outreach.models.sending import Enrollment, Message
from tests.outreach.branching import (
    DAY,
    branch,
    branched_events,
    email,
    enrolled,
    graph_campaign,
    later,
    run,
)
from tests.support.database import live_database_url

ROOT = Path(__file__).resolve().parents[2]
ELEMENTS = [
    email("intro", "wait"),
    branch("wait", of="intro", then="yes", else_="no"),
    email("yes", "end"),
    email("no", "end"),
]


@pytest.fixture
def sink(smtp_sink, db):
    return smtp_sink()


def _waiting(sink, count: int):
    """`count` enrollments waiting at "wait" since two days ago (their deadline passed)."""
    campaign = graph_campaign(sink, ELEMENTS)
    start = timezone.now() - timedelta(days=2)
    enrollments = [enrolled(campaign, at=start) for _ in range(count)]
    run(start)
    assert Enrollment.objects.filter(current_key="wait", branch_deadline__isnull=False).count() == (
        count
    )
    return campaign, enrollments, start


def _together(*calls):
    """Run the calls in threads of their own (each its own connection), released at once."""
    barrier = threading.Barrier(len(calls))
    errors = []

    def go(call):
        try:
            barrier.wait()
            call()
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=go, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors, errors


def _decided_once(enrollments):
    for enrollment in enrollments:
        enrollment.refresh_from_db()
        assert enrollment.path.count("wait") == 1
        assert BranchDecision.objects.filter(enrollment=enrollment).count() == 1
    events = branched_events()
    assert len(events) == len(enrollments)
    assert len({e["enrollment_id"] for e in events}) == len(enrollments)


@pytest.mark.django_db(transaction=True)
def test_an_event_and_the_deadline_racing_decide_once(sink):
    _campaign, enrollments, start = _waiting(sink, 6)
    deadline_at = later(start, DAY + 1)
    events = [
        lambda e=e: branch_decide(enrollment_id=e.pk, branch_key="wait", outcome="then")
        for e in enrollments
    ]
    _together(lambda: branch_deadlines_decide(now=deadline_at), *events)
    _decided_once(enrollments)
    outcomes = {e["enrollment_id"]: e["outcome"] for e in branched_events()}
    for enrollment in enrollments:
        assert enrollment.current_key == {"then": "yes", "else": "no"}[outcomes[str(enrollment.pk)]]


@pytest.mark.django_db(transaction=True)
def test_two_deadline_runs_at_once_decide_each_once(sink, settings):
    settings.SENDING_BATCH_SIZE = 3  # several transactions each, skipping the other's rows
    _campaign, enrollments, start = _waiting(sink, 10)
    deadline_at = later(start, DAY + 1)
    _together(*(lambda: branch_deadlines_decide(now=deadline_at) for _ in range(2)))
    _decided_once(enrollments)
    assert {e.current_key for e in enrollments} == {"no"}


_KILLED_RUN = """
import sys, time
import django
django.setup()
from datetime import datetime
from outreach.campaigns import branch_moves
def held(tally):
    print("decided", flush=True)
    time.sleep(60)
branch_moves.branch_counts_write = held
branch_moves.branch_deadlines_decide(now=datetime.fromisoformat(sys.argv[1]))
"""


@pytest.mark.django_db(transaction=True)
def test_a_run_killed_before_its_commit_decided_nothing_and_the_next_decides_once(sink):
    _campaign, enrollments, start = _waiting(sink, 3)
    deadline_at = later(start, DAY + 1)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings_test",
        "DATABASE_URL": live_database_url(),
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    process = subprocess.Popen(
        [sys.executable, "-c", _KILLED_RUN, deadline_at.isoformat()],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # its decisions written, not committed
        assert line.strip() == b"decided", process.stderr.read() if process.stderr else b""
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(10)
    time.sleep(0.2)  # the server notices the dropped connection and rolls it back
    assert Enrollment.objects.filter(current_key="wait").count() == 3
    assert branched_events() == [] and not BranchDecision.objects.exists()

    run(deadline_at)  # the next scheduler run: decided, and the step due now sent
    _decided_once(enrollments)
    assert sorted(Message.objects.values_list("step_key", flat=True)) == ["intro"] * 3 + ["no"] * 3
    run(later(deadline_at, 5))
    assert Message.objects.count() == 6  # nothing sent twice
