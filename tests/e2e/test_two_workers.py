"""Two sending workers on one database and one broker, as two worker hosts run them: each
a real `celery -A config worker -Q celery,sending,imports,intake` (the Procfile's worker
line) with its own hostname and its own beat, so two schedulers tick on the same rows,
and a third scheduler in this process that skips the run lock, so claim transactions
really overlap (the run lock alone would take turns). Many paced mailboxes, a backlog
larger than they can send while the test watches, and a few three-step threads, all
sent to one SMTP sink. What the sink received must keep each mailbox's pace and never
carry one step of one enrollment twice, and both workers must have sent."""

import ast
import re
import threading
import time
from collections import Counter, defaultdict
from itertools import pairwise

import pytest
from django.db import connection
from django.utils import timezone

from outreach.models.campaigns import Campaign, CampaignStep
from outreach.models.sending import Enrollment, Message, SendClaim
from outreach.sending import scheduler
from tests.outreach.factories import (
    CampaignFactory,
    ContactFactory,
    CredentialFactory,
    EnrollmentFactory,
)
from tests.support.celery_worker import send_task

pytestmark = [pytest.mark.e2e]

# The pace of every mailbox: a gap drawn from [1, 2] s between two of its sends.
MIN_INTERVAL, MAX_INTERVAL = 1, 2
# Times compared below all come from this machine's one wall clock (time.time() in the
# sink, timezone.now() in the workers' records and claims, both microseconds or finer);
# PostgreSQL keeps microseconds. One microsecond of rounding is all two readings of it can
# disagree by.
CLOCK_GRANULARITY = 1e-6
BACKLOG_MAILBOXES, BACKLOG = 10, 200  # one-step campaign: ~10 sends a second at most
THREAD_MAILBOXES, THREADS, THREAD_STEPS = 2, 4, 3
WORKER_ENV = {
    "SENDING_SCHEDULE_INTERVAL_SECONDS": "0.3",
    "DB_POOL_MAX_SIZE": "4",
}
# The Procfile's worker line.
QUEUES = "celery,sending,imports,intake"
SCHEDULED = re.compile(r"Task outreach\.tasks\.schedule_sends\[[^]]+\] succeeded in [^:]+: (\d+)")
SUCCEEDED = re.compile(
    r"Task outreach\.tasks\.send_mailboxes\[[^]]+\] succeeded in [^:]+: (\{.*\})"
)


def _mailboxes(account, sink, count: int, prefix: str):
    return [
        CredentialFactory(
            account=account,
            from_email=f"{prefix}{i}@sender.example.com",
            smtp_host=sink.host,
            smtp_port=sink.port,
            smtp_security="none",
            smtp_username="",
            smtp_password="",
            min_interval_seconds=MIN_INTERVAL,
            max_interval_seconds=MAX_INTERVAL,
        )
        for i in range(count)
    ]


def _paused_campaign(account, mailboxes, *, steps: int, contacts: int, prefix: str) -> Campaign:
    """A campaign paused by hand, its `contacts` enrollments due since long ago: nothing
    is sent until it is resumed."""
    campaign = CampaignFactory(
        account=account,
        status=Campaign.Status.PAUSED,
        paused_reason=Campaign.PausedReason.MANUAL,
        with_steps=steps,
        with_credential=False,
    )
    campaign.credentials.set(mailboxes)
    CampaignStep.objects.filter(campaign=campaign).update(delay_minutes=0)
    for i in range(contacts):
        EnrollmentFactory(
            campaign=campaign,
            contact=ContactFactory(account=account, email=f"{prefix}{i}@example.org"),
            status=Enrollment.Status.SCHEDULED,
            next_send_at="2026-01-01T00:00:00Z",
        )
    return campaign


class LocklessScheduler:
    """Scheduler runs in a loop in this process, without the run lock (as
    tests/outreach/test_pace.py's bypass): each run overlaps the workers' beat runs for
    real. Its batches go to the broker's `sending` queue, for the workers to send."""

    def __init__(self, monkeypatch):
        self.runs = 0
        self.claimed = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        monkeypatch.setattr(
            scheduler,
            "batches_enqueue",
            lambda mailboxes: send_task(
                "outreach.tasks.send_mailboxes",
                [[str(credential_id), batch_ids] for credential_id, batch_ids in mailboxes],
            ),
        )

    def _run(self):
        try:
            while not self._stop.is_set():
                batches = scheduler._schedule_due(now=timezone.now(), enqueue=True)
                self.runs += 1
                self.claimed += sum(batch.size for batch in batches)
                time.sleep(0.05)
        except BaseException as exc:  # reported by stop()
            self.error = exc
        finally:
            connection.close()

    def start(self) -> "LocklessScheduler":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        if self.error is not None:
            raise self.error


def _sent_by(worker) -> int:
    """Messages the worker's sending tasks sent, from the results its log reports."""
    return sum(ast.literal_eval(m)["sent"] for m in SUCCEEDED.findall(worker.log))


def _batches_scheduled_by(worker) -> int:
    """Batches the scheduler runs on the worker (its beat's, or the other's) queued."""
    return sum(int(n) for n in SCHEDULED.findall(worker.log))


def _wait_until(predicate, *, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.1)


def test_two_workers_keep_every_mailbox_pace_and_send_each_step_once(
    live_db, account, api_client, smtp_sink, celery_worker, monkeypatch
):
    sink = smtp_sink()
    backlog = _paused_campaign(
        account,
        _mailboxes(account, sink, BACKLOG_MAILBOXES, "bulk"),
        steps=1,
        contacts=BACKLOG,
        prefix="b",
    )
    threads = _paused_campaign(
        account,
        _mailboxes(account, sink, THREAD_MAILBOXES, "thread"),
        steps=THREAD_STEPS,
        contacts=THREADS,
        prefix="t",
    )
    workers = [
        celery_worker(beat=True, concurrency=12, env=WORKER_ENV, queues=QUEUES, name=name)
        for name in ("host-a", "host-b")
    ]
    racer = LocklessScheduler(monkeypatch)

    for campaign in (backlog, threads):
        response = api_client.post(f"/campaigns/{campaign.pk}/resume")
        assert response.status_code == 200, response.content
    racer.start()
    try:
        # Every thread's three steps, each after its mailbox's pace: 12 sends over two
        # mailboxes, 6 s at the least. The backlog meanwhile sends what its pace allows.
        _wait_until(
            lambda: (
                Enrollment.objects.filter(campaign=threads, status="completed").count() == THREADS
            ),
            timeout=60,
            what="the three-step threads to complete",
        )
    finally:
        racer.stop()
    # The threads' campaign completed with its last send; the backlog's is paused.
    assert api_client.get(f"/campaigns/{threads.pk}").json()["status"] == "completed"
    assert api_client.post(f"/campaigns/{backlog.pk}/pause").status_code == 200
    # Claims made before the pause are sent or given back (their start mark requires an
    # active campaign); then nothing is in flight.
    _wait_until(lambda: not SendClaim.objects.open().exists(), timeout=30, what="no claim left")
    for worker in workers:
        worker.stop()

    received = sorted(sink.messages, key=lambda m: m.at)
    stored = {
        m.message_id: m for m in Message.objects.select_related("credential", "enrollment__contact")
    }
    # The backlog was more than the mailboxes could send meanwhile.
    left = Enrollment.objects.filter(campaign=backlog, status="scheduled").count()
    assert 0 < left < BACKLOG

    # One message per (enrollment, step), and the database's rows are the sink's, one
    # for one: same Message-IDs, same sender, same recipient.
    ids = [m.message["Message-ID"].strip("<>") for m in received]
    assert len(ids) == len(set(ids)) == len(stored)
    # Each message is one attempt's, sent.
    assert SendClaim.objects.filter(outcome="sent").count() == len(stored)
    assert set(ids) == set(stored)
    for message, message_id in zip(received, ids, strict=True):
        row = stored[message_id]
        assert (message.mail_from, message.rcpt_tos) == (row.credential.from_email, [row.to_email])
    steps = Counter((row.enrollment_id, row.step) for row in stored.values())
    assert max(steps.values()) == 1
    to_and_step = Counter(
        (m.rcpt_tos[0], stored[i].step) for m, i in zip(received, ids, strict=True)
    )
    assert max(to_and_step.values()) == 1

    # Each thread went out step after step from one mailbox, each follow-up in reply to
    # the message before it.
    for enrollment in Enrollment.objects.filter(campaign=threads):
        mine = [m.message for m in received if m.rcpt_tos == [enrollment.contact.email]]
        assert len(mine) == THREAD_STEPS
        assert len({m["From"] for m in mine}) == 1
        for earlier, later in pairwise(mine):
            assert later["In-Reply-To"] == earlier["Message-ID"]

    # No mailbox sent twice within its minimum pace, as its server saw the messages.
    by_sender = defaultdict(list)
    for message in received:
        by_sender[message.mail_from].append(message.at)
    assert len(by_sender) == BACKLOG_MAILBOXES + THREAD_MAILBOXES
    gaps = {
        sender: min(b - a for a, b in pairwise(times))
        for sender, times in by_sender.items()
        if len(times) > 1
    }
    assert gaps and all(g >= MIN_INTERVAL - CLOCK_GRANULARITY for g in gaps.values()), gaps

    # Both hosts sent, and between them every message the sink took.
    shares = [_sent_by(worker) for worker in workers]
    assert all(share > 0 for share in shares), shares
    assert sum(shares) == len(received)
    # Claims came from both sides: the workers' beats (under the run lock) and the
    # lockless runs here.
    assert racer.claimed > 0
    assert sum(_batches_scheduled_by(worker) for worker in workers) > 0
