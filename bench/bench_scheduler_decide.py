"""Benchmark: one scheduler run (`schedule_due`) in process, over one campaign of M
mailboxes and N due enrollments, comparing two checkouts of the code in paired rounds.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/outreach_schedbench \\
    REDIS_URL=redis://127.0.0.1:6379/5 \\
      .venv/bin/python bench/bench_scheduler_decide.py \\
        --base /path/to/a/checkout/of/main --rounds 8 [--mailboxes 200 --enrollments 2000]

The world (ORM, once): M mailboxes on one campaign: most unpaced with room, a tenth
paced (60-120 s, free now: one claim each), a twentieth each disabled, paused by the
complaint guard, waiting to be re-authorized; N contacts enrolled, all due now. A round
runs `--runs` timed runs of each checkout, one process each (the checkout's code first
on sys.path; the process's start and Django's set-up are not timed), base then this one
or this one then base, alternating; before each run the claims are deleted and the
mailboxes' counters and pace put back, so every run claims the same. Figures: per round
the median run of each, and the ratio base / this (above 1: this one is faster); the
median of the rounds' ratios. It deletes its account (bench-sched-...) at the end.

`--rules-cost K` instead profiles K runs of this checkout alone (cProfile): the time
spent in the rules of outreach.mailboxes.blockers (MailboxFacts built, mailbox_usable,
deferral) against the whole run's, a figure the machine's drift touches far less.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
NOW = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)  # a Monday, inside the default window
LABEL = "bench-sched"


def _django(root: Path) -> None:
    """Django from `root`'s tree, set up as every benchmark is (its bench/_setup.py)."""
    sys.path.insert(0, str(root / "bench"))
    import _setup  # noqa: F401 - sets the environment up and Django with it


def _account():
    from accounts.models import Account

    return Account.objects.filter(email__startswith=f"{LABEL}-").first()


def world_create(mailboxes: int, enrollments: int) -> None:
    from django.core.management import call_command
    from django.db import connection

    from accounts.models import Account
    from outreach.models.campaigns import Campaign, CampaignStep
    from outreach.models.contacts import Contact
    from outreach.models.mailboxes import SmtpCredential
    from outreach.models.sending import Enrollment
    from plans.models import Plan

    call_command("migrate", verbosity=0)
    world_drop()
    account = Account.objects.create(
        email=f"{LABEL}-{os.getpid()}@example.com", plan=Plan.objects.get(slug="free")
    )
    boxes = []
    for i in range(mailboxes):
        extra = {}
        if i % 10 == 1:
            extra = {"min_interval_seconds": 60, "max_interval_seconds": 120}
        elif i % 20 == 2:
            extra = {"disabled_at": NOW}
        elif i % 20 == 4:
            extra = {"paused_at": NOW}
        elif i % 20 == 6:
            extra = {"auth_method": "oauth_google", "oauth_status": "reauthorization_required"}
        boxes.append(
            SmtpCredential(
                account=account,
                from_email=f"mailbox{i}@sender{i}.example",
                smtp_host="127.0.0.1",
                smtp_port=2525,
                smtp_security="none",
                daily_limit=100_000,
                min_interval_seconds=extra.pop("min_interval_seconds", 0),
                max_interval_seconds=extra.pop("max_interval_seconds", 0),
                **extra,
            )
        )
    boxes = SmtpCredential.objects.bulk_create(boxes)
    campaign = Campaign.objects.create(account=account, name="bench", status="active")
    campaign.credentials.add(*boxes)
    CampaignStep.objects.create(
        campaign=campaign, position=1, delay_minutes=0, subject="Hi", body_text="Hello"
    )
    contacts = Contact.objects.bulk_create(
        Contact(account=account, email=(e := f"r{i}@bench{i % 50}.example"), email_lower=e)
        for i in range(enrollments)
    )
    Enrollment.objects.bulk_create(
        Enrollment(campaign=campaign, contact=c, status="scheduled", next_send_at=NOW)
        for c in contacts
    )
    with connection.cursor() as cursor:  # statistics of the new rows, as a live table has
        cursor.execute("ANALYZE")


def world_reset(account) -> None:
    from outreach.models.mailboxes import SmtpCredential
    from outreach.models.sending import SendClaim

    SendClaim.objects.filter(enrollment__campaign__account=account)._raw_delete("default")
    SmtpCredential.objects.filter(account=account).update(
        daily_sent_count=0, daily_sent_on=None, next_send_earliest_at=None
    )


def world_drop() -> None:
    from _setup import account_drop

    from accounts.models import Account

    for account in Account.objects.filter(email__startswith=f"{LABEL}-"):
        account_drop(account)


def runs_time(runs: int) -> list[float]:
    """`runs` timed scheduler runs of the code on sys.path, each from the same state."""
    from outreach.sending.scheduler import schedule_due

    account = _account()
    times, claimed = [], set()
    for _ in range(runs):
        world_reset(account)
        start = time.perf_counter()
        batches = schedule_due(now=NOW)
        times.append(time.perf_counter() - start)
        claimed.add(sum(b.size for b in batches))
    world_reset(account)
    assert len(claimed) == 1, claimed  # every run claims the same
    print(f"claimed {claimed.pop()}", file=sys.stderr)
    return times


def rules_cost(runs: int) -> None:
    """This checkout's runs under cProfile: the time spent in the rules
    (outreach/mailboxes/blockers.py, calls included) against the whole run's."""
    import cProfile
    import pstats

    from outreach.sending.scheduler import schedule_due

    account = _account()
    for _ in range(runs):
        world_reset(account)
        profile = cProfile.Profile()
        profile.enable()
        schedule_due(now=NOW)
        profile.disable()
        stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
        total = max(cum for _, _, _, cum, _ in stats.values())
        entry = ("mailbox_usable", "deferral", "__init__")
        rules = sum(
            cum
            for (path, _, name), (_, calls, _, cum, _) in stats.items()
            if path.endswith("mailboxes/blockers.py") and name in entry
        )
        calls = sum(
            calls
            for (path, _, name), (_, calls, _, _, _) in stats.items()
            if path.endswith("mailboxes/blockers.py") and name in entry[:2]
        )
        print(f"run {total * 1000:.0f} ms, rules {rules * 1000:.1f} ms over {calls} calls")
    world_reset(account)


def _child(root: Path, runs: int) -> tuple[float, str]:
    """(the median run, how many it claimed) of `runs` runs of the code at `root`."""
    out = subprocess.run(
        [sys.executable, __file__, "--time", str(runs), "--code", str(root)],
        check=True,
        capture_output=True,
        text=True,
    )
    claimed = [line for line in out.stderr.splitlines() if line.startswith("claimed")]
    return float(out.stdout.strip().splitlines()[-1]), claimed[-1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", type=Path)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--mailboxes", type=int, default=200)
    parser.add_argument("--enrollments", type=int, default=2000)
    parser.add_argument("--time", type=int)  # a child: time this many runs
    parser.add_argument("--code", type=Path, default=HERE)
    parser.add_argument("--rules-cost", type=int)  # profile this many runs of this checkout
    args = parser.parse_args()
    _django(args.code)
    if args.rules_cost:
        world_create(args.mailboxes, args.enrollments)
        try:
            rules_cost(args.rules_cost)
        finally:
            world_drop()
        return
    if args.time:
        print(statistics.median(runs_time(args.time)))
        return
    world_create(args.mailboxes, args.enrollments)
    ratios = []
    try:
        for n in range(args.rounds):
            order = [("base", args.base), ("this", HERE)]
            if n % 2:
                order.reverse()
            results = {name: _child(root, args.runs) for name, root in order}
            medians = {name: median for name, (median, _) in results.items()}
            # Both claim the same (each child checks its runs claim alike).
            assert results["base"][1] == results["this"][1], results
            ratios.append(medians["base"] / medians["this"])
            print(
                f"round {n + 1}: base {medians['base'] * 1000:.0f} ms, "
                f"this {medians['this'] * 1000:.0f} ms, ratio {ratios[-1]:.3f}, "
                f"{results['this'][1]}",
                flush=True,
            )
    finally:
        world_drop()
    print(f"median ratio base/this over {len(ratios)} rounds: {statistics.median(ratios):.3f}")
    print(f"load: {os.getloadavg()}")


if __name__ == "__main__":
    main()
