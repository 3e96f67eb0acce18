"""Branches (API.md 17): N enrollments waiting at one branch, 10% of them opening within
its deadline.

    DATABASE_URL=postgres://... REDIS_URL=... .venv/bin/python bench/bench_branches.py [n] \
      [--cost-only]   (1. alone: no opens)

1. The scheduler run's cost without and with the N waiting enrollments: the fastest
   (and the median) of RUNS runs (`schedule_due`, nothing due) before they exist, then
   after (made and ANALYZEd). The waiting ones must cost a run nothing (goal: ratio <= 1.1): they have
   no next_send_at (the due scan's index has nothing of them below now) and their
   deadline is days ahead (the deadline scan's partial index, neither).
2. From each open to its next email's claim: 10% of them open (the pixel's service,
   `enrollment_mark_opened`, naming the step), one after the other as fast as this
   process goes, while a scheduler thread runs every SENDING_SCHEDULE_INTERVAL_SECONDS
   (beat's tick) and hands its claims to a stand-in sender that finishes them at once
   (the send itself is bench_sending.py's). p50 and p99 of (the end of the run that
   claimed the step - the start of its open).

The enrollments are made as a send leaves them (status sent, at the branch, deadline in
three days, the first message recorded). The scheduler's ring on each decision
(SENDING_SCHEDULE_ON_DISPATCH) is off: the latency is beat's alone.
"""

import os
import statistics
import sys
import threading
import time
from datetime import timedelta

os.environ["SENDING_SCHEDULE_ON_DISPATCH"] = "false"

from _setup import account_create, account_drop, mailboxes_create, prepare  # noqa: E402

ARGS = [a for a in sys.argv[1:] if not a.startswith("--")]
N = int(ARGS[0]) if ARGS else 100_000
COST_ONLY = "--cost-only" in sys.argv
OPENING = max(1, N // 10)
RUNS = 41
WARM = 5
GOAL_RATIO = 1.1


def _campaign(account):
    from outreach.models.campaigns import Campaign, CampaignStep

    campaign = Campaign.objects.create(account=account, name="bench branches", status="active")
    rows = [
        {"key": "intro", "next_key": "wait", "subject": "Hi", "body_text": "Intro"},
        {
            "key": "wait",
            "body_text": "",
            "branch": {
                "on": "opened",
                "of": "intro",
                "within_minutes": 3 * 24 * 60,
                "then": "case_study",
                "else": "bump",
            },
        },
        {"key": "case_study", "next_key": "end", "body_text": "Case study"},
        {"key": "bump", "next_key": "end", "body_text": "Bump"},
    ]
    for position, row in enumerate(rows, start=1):
        CampaignStep.objects.create(campaign=campaign, position=position, **row)
    campaign.credentials.add(
        *mailboxes_create(account, 4, port=9, min_interval_seconds=0, max_interval_seconds=0)
    )
    return campaign


def _waiting(account, campaign, now) -> list:
    """N enrollments as the send of "intro" left them, waiting at "wait"."""
    from django.db import connection

    from outreach.models.contacts import Contact
    from outreach.models.sending import Enrollment, Message

    contacts = Contact.objects.bulk_create(
        (
            Contact(account=account, email=f"w{i}@example.org", email_lower=f"w{i}@example.org")
            for i in range(N)
        ),
        batch_size=5000,
    )
    enrollments = Enrollment.objects.bulk_create(
        (
            Enrollment(
                campaign=campaign,
                contact=contact,
                status="sent",
                current_step=1,
                last_step=1,
                current_key="wait",
                path=["intro"],
                branch_deadline=now + timedelta(days=3),
                sent_at=now,
                dispatched_at=now,
            )
            for contact in contacts
        ),
        batch_size=5000,
    )
    Message.objects.bulk_create(
        (
            Message(
                account=account,
                enrollment=e,
                step=1,
                step_key="intro",
                message_id=f"{e.pk}@bench.example",
                to_email=f"w{i}@example.org",
                sent_at=now,
            )
            for i, e in enumerate(enrollments)
        ),
        batch_size=5000,
    )
    with connection.cursor() as cursor:
        for table in ("outreach_enrollment", "outreach_contact", "outreach_message"):
            cursor.execute(f"ANALYZE {table}")
    return [e.pk for e in enrollments]


def _run_cost() -> tuple[float, float]:
    """The fastest and the median seconds of RUNS scheduler runs with nothing due (after
    WARM runs): the fastest is the run's own cost, the median what a shared machine
    made of it."""
    from outreach.sending.scheduler import schedule_due

    seconds = []
    for index in range(WARM + RUNS):
        started = time.perf_counter()
        assert schedule_due() == []
        if index >= WARM:
            seconds.append(time.perf_counter() - started)
    return min(seconds), statistics.median(seconds)


def _ticks(stop: threading.Event, claimed: dict) -> None:
    """Beat's scheduler runs, each batch's claims finished at once by a stand-in sender
    (the enrollment completed, as the send of its last step leaves it)."""
    from django.conf import settings
    from django.db import connection
    from django.utils import timezone

    from outreach.models.sending import Enrollment, SendClaim
    from outreach.sending.scheduler import schedule_due

    try:
        while not stop.is_set():
            started = time.perf_counter()
            batches = schedule_due()
            done = time.time()
            ids = [b.batch_id for b in batches]
            if ids:
                claims = SendClaim.objects.open().filter(batch_id__in=ids)
                enrollment_ids = list(claims.values_list("enrollment_id", flat=True))
                for enrollment_id in enrollment_ids:
                    claimed[enrollment_id] = done
                claims.update(finished_at=timezone.now(), outcome="sent")
                Enrollment.objects.filter(pk__in=enrollment_ids).update(
                    status="completed", next_send_at=None, current_key=None
                )
            rest = settings.SENDING_SCHEDULE_INTERVAL_SECONDS - (time.perf_counter() - started)
            if rest > 0:
                time.sleep(rest)
    finally:
        connection.close()


def _drop(account) -> None:
    from outreach.models.branches import BranchDecision
    from outreach.models.sending import Message

    for queryset in (
        BranchDecision.objects.filter(enrollment__campaign__account=account),
        Message.objects.filter(account=account),
    ):
        queryset._raw_delete(queryset.db)
    account_drop(account)


def main() -> None:
    prepare()
    from django.utils import timezone

    from outreach.intake.services import enrollment_mark_opened

    account = account_create("branches")
    try:
        campaign = _campaign(account)
        without = _run_cost()
        ids = _waiting(account, campaign, timezone.now())
        with_waiting = _run_cost()
        if COST_ONLY:
            ids = []

        opened_at: dict = {}
        claimed: dict = {}
        stop = threading.Event()
        ticker = threading.Thread(target=_ticks, args=(stop, claimed))
        ticker.start()
        started = time.perf_counter()
        for enrollment_id in ids[:: max(1, len(ids) // OPENING)][:OPENING]:
            opened_at[enrollment_id] = time.time()
            enrollment_mark_opened(enrollment_id=enrollment_id, step=1)
        opening = time.perf_counter() - started
        deadline = time.time() + 60
        while len(claimed) < len(opened_at) and time.time() < deadline:
            time.sleep(0.2)
        stop.set()
        ticker.join()
    finally:
        _drop(account)
    latencies = sorted(claimed[e] - opened_at[e] for e in opened_at if e in claimed)
    ratio = with_waiting[0] / without[0]
    print(f"waiting: {N:,}; opening: {len(opened_at):,} in {opening:.1f} s")
    print(
        f"scheduler run, nothing due ({RUNS} runs, fastest / median): without"
        f" {without[0] * 1000:.2f} / {without[1] * 1000:.2f} ms, with the waiting"
        f" {with_waiting[0] * 1000:.2f} / {with_waiting[1] * 1000:.2f} ms"
    )
    print(
        f"  ratio (fastest) {ratio:.3f} (goal <= {GOAL_RATIO}: "
        f"{'met' if ratio <= GOAL_RATIO else 'MISSED'}); ratio (median)"
        f" {with_waiting[1] / without[1]:.3f}"
    )
    if latencies:
        p50 = latencies[len(latencies) // 2]
        p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
        print(f"open -> next email claimed: p50 {p50:.3f} s, p99 {p99:.3f} s")
    print(f"claimed: {len(claimed):,} of {len(opened_at):,} opened")
    print(f"load {os.getloadavg()[0]:.2f} (1 min) at the end")


if __name__ == "__main__":
    main()
