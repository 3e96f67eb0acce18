"""What one scheduler run costs as the fleet grows: N paced mailboxes of which nearly all
are waiting on their pace, in process, against DATABASE_URL.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/outreach_schedbench \\
      .venv/bin/python bench/bench_scheduler_scale.py --mailboxes 1000,3000,10000

The world, per N: one account (scale plan); N mailboxes paced `--pace` (100-200 s),
on campaigns of `--per-campaign` mailboxes (100, the most a campaign names through the
API; 0: all on one), step 1; `--contacts-per-mailbox` (3) contacts per mailbox enrolled
and due now (scheduled, new threads: they rotate). Every mailbox waits on its pace
(next_send_earliest_at an hour ahead) but `--free` of them drawn at random (default
N / 150: a fleet paced 100-200 s frees N / 150 mailboxes a second, a run a second); then
VACUUM ANALYZE. Before each run the open claims are deleted and the free mailboxes made
free again (their rows alone written), so every run meets the same state. One run is `schedule_due(now=now)` (the whole run:
recovery, suppressed, branch deadlines, the view, the claim transactions).

Per N, over `--runs` runs (the median, and the per-mailbox ratios of the median):
* wall time of `schedule_due`;
* queries (django's CaptureQueriesContext; the run lock's own connection not counted);
* the bench database's reads: pg_stat_database's blks_hit + blks_read (8 KiB blocks
  read from shared buffers or the OS), tup_returned (rows scanned) and tup_fetched (rows
  fetched by index), deltas around the run, the backend's statistics flushed first
  (pg_stat_force_next_flush, PostgreSQL 15); pg_stat_statements would need
  shared_preload_libraries;
* claims made (the free mailboxes, one each when the run reaches them).

It deletes its accounts (bench-schedscale-...) before and after.
"""

import argparse
import os
import random
import re
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from _setup import account_create, contacts_create, mailboxes_create, prepare, step_create

LABEL = "schedscale"


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def stats_conn():
    """An autocommit connection to the `postgres` database (its reads are not the bench
    database's) and the bench database's name."""
    import psycopg

    parts = urlsplit(os.environ["DATABASE_URL"])
    conn = psycopg.connect(urlunsplit(parts._replace(path="/postgres")), autocommit=True)
    return conn, parts.path.lstrip("/")


def counters(conn, database: str) -> dict:
    """The bench database's read counters, after this process's backend flushed its own
    (it flushes when it goes idle once pg_stat_force_next_flush was called)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")
    time.sleep(0.05)
    row = conn.execute(
        "SELECT blks_hit + blks_read, blks_read, tup_returned, tup_fetched "
        "FROM pg_stat_database WHERE datname = %s",
        [database],
    ).fetchone()
    return dict(zip(("blocks", "blocks_read", "tup_returned", "tup_fetched"), row, strict=True))


def world(count: int, *, per_campaign: int, contacts_per_mailbox: int, pace: tuple):
    """The account, its mailboxes (ids) and campaigns, the contacts' due enrollments."""
    from django.utils import timezone

    from outreach.models.campaigns import Campaign
    from outreach.models.sending import Enrollment

    account = account_create(LABEL, plan="scale")
    credentials = mailboxes_create(
        account, count, port=2525, min_interval_seconds=pace[0], max_interval_seconds=pace[1]
    )
    per_campaign = per_campaign or count
    due = timezone.now() - timedelta(minutes=1)
    offset = 0
    for n, start in enumerate(range(0, count, per_campaign)):
        campaign = Campaign.objects.create(
            account=account, name=f"fleet {n}", status=Campaign.Status.ACTIVE
        )
        mailboxes = credentials[start : start + per_campaign]
        campaign.credentials.add(*mailboxes)
        step = step_create(campaign)
        contacts = contacts_create(account, len(mailboxes) * contacts_per_mailbox, start=offset)
        offset += len(contacts)
        Enrollment.objects.bulk_create(
            Enrollment(
                campaign=campaign,
                contact=contact,
                status=Enrollment.Status.SCHEDULED,
                current_key=step.key,
                next_send_at=due,
            )
            for contact in contacts
        )
    return account, [c.pk for c in credentials]


def vacuum() -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "VACUUM ANALYZE outreach_enrollment, outreach_contact, outreach_smtpcredential, "
            "outreach_campaign_credentials, outreach_campaign, outreach_sendclaim"
        )


def state_set(account, mailbox_ids: list, free: int, rng: random.Random, now) -> list:
    """Every mailbox waiting on its pace, an hour ahead, but `free` drawn at random, and
    VACUUM ANALYZE (no autovacuum's reads in a run's figures). Returns the free ones."""

    from outreach.models.mailboxes import SmtpCredential

    chosen = rng.sample(mailbox_ids, free)
    mailboxes = SmtpCredential.objects.filter(account=account)
    mailboxes.update(next_send_earliest_at=now + timedelta(hours=1))
    mailboxes.filter(pk__in=chosen).update(next_send_earliest_at=now - timedelta(seconds=1))
    vacuum()
    return chosen


def state_reset(account, free: list, now) -> None:
    """The state before a run again: no open claim, the free mailboxes free again and
    their day's counts at 0 (only those rows written: a run's figures are not those of
    an autovacuum of thousands of mailbox rows)."""
    from outreach.models.mailboxes import SmtpCredential
    from outreach.models.sending import SendClaim

    SendClaim.objects.filter(enrollment__campaign__account=account).delete()
    SmtpCredential.objects.filter(pk__in=free).update(
        next_send_earliest_at=now - timedelta(seconds=1), daily_sent_count=0
    )


def one_run(account, conn, database: str) -> dict:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from outreach.sending.scheduler import schedule_due

    before = counters(conn, database)
    with CaptureQueriesContext(connection) as queries:
        started = time.perf_counter()
        batches = schedule_due(now=timezone.now())
        seconds = time.perf_counter() - started
    after = counters(conn, database)
    figures = {name: after[name] - before[name] for name in before}
    figures.update(seconds=seconds, queries=len(queries), claims=sum(b.size for b in batches))
    figures["sql_seconds"] = sum(float(q["time"]) for q in queries.captured_queries)
    figures["statements"] = [(float(q["time"]), q["sql"]) for q in queries.captured_queries]
    return figures


def explain(statements: list, plans: int = 0) -> None:
    """Each SELECT of a run again under EXPLAIN (ANALYZE, BUFFERS), in a transaction that
    is rolled back: the blocks of each (shared hit + read, the plan's top node), the
    most first, and the whole plan of the claim scan."""
    from django.db import connection, transaction

    costs = []
    with transaction.atomic(), connection.cursor() as cursor:
        for _, sql in statements:
            if not sql.lstrip().startswith("SELECT") or "pg_" in sql[:40]:
                continue
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql)
            plan = [line for (line,) in cursor.fetchall()]
            blocks = 0
            for line in plan:
                if "Buffers:" in line:
                    blocks = sum(int(n) for n in re.findall(r"(?:hit|read)=(\d+)", line))
                    break
            costs.append((blocks, sql, plan))
        transaction.set_rollback(True)
    for n, (blocks, sql, plan) in enumerate(sorted(costs, key=lambda c: -c[0])[:8]):
        print(f"      {blocks:7d} blocks  {sql[:160]}")
        if n < plans:
            for line in plan:
                if "cost=" in line:
                    print(f"        {line[:200]}")
    for _, sql, plan in costs:
        if '"contact_timezone"' in sql:
            print("      the claim scan:")
            for line in plan:
                print(f"        {line}")
            break


def accounts_purge() -> None:
    from _setup import account_drop

    from accounts.models import Account

    for account in Account.objects.filter(email__startswith=f"bench-{LABEL}-"):
        account_drop(account)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mailboxes", default="1000,3000,10000")
    parser.add_argument("--per-campaign", type=int, default=100)
    parser.add_argument("--contacts-per-mailbox", type=int, default=3)
    parser.add_argument("--pace", default="100,200")
    parser.add_argument("--free", type=int, default=None, help="default N / 150")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument(
        "--queries", action="store_true", help="print the last run's statements, slowest first"
    )
    parser.add_argument(
        "--explain",
        action="store_true",
        help="EXPLAIN (ANALYZE, BUFFERS) the last run's reads, again, rolled back",
    )
    parser.add_argument(
        "--plans", type=int, default=0, help="with --explain: the N costliest plans"
    )
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL"):
        sys.exit("set DATABASE_URL (the reads are pg_stat_database's for its database)")
    pace = tuple(int(x) for x in args.pace.split(","))
    prepare()
    accounts_purge()
    from django.utils import timezone

    conn, database = stats_conn()
    rng = random.Random(7)
    print(
        f"scheduler run cost: campaigns of {args.per_campaign or 'all the'} mailboxes, pace "
        f"{pace[0]}-{pace[1]} s, {args.contacts_per_mailbox} due enrollments per mailbox, "
        f"{args.runs} runs each; load {load()}"
    )
    rows = []
    for count in (int(x) for x in args.mailboxes.split(",")):
        free = args.free if args.free is not None else max(1, count // 150)
        started = time.time()
        account, mailbox_ids = world(
            count,
            per_campaign=args.per_campaign,
            contacts_per_mailbox=args.contacts_per_mailbox,
            pace=pace,
        )
        made = time.time() - started
        try:
            runs = []
            chosen = state_set(account, mailbox_ids, free, rng, timezone.now())
            for _ in range(args.runs):
                state_reset(account, chosen, timezone.now())
                runs.append(one_run(account, conn, database))
        finally:
            from _setup import account_drop

            if args.explain:
                state_reset(account, chosen, timezone.now())
                explain(runs[-1]["statements"], plans=args.plans)
            account_drop(account)
            vacuum()  # the rows deleted: no autovacuum's reads in the next N's runs
        median = {k: statistics.median(r[k] for r in runs) for k in runs[0] if k != "statements"}
        each = ", ".join(f"{r['seconds'] * 1000:.0f}" for r in runs)
        rows.append((count, free, median))
        print(
            f"  {count} mailboxes ({free} free, world in {made:.0f} s): run "
            f"{median['seconds'] * 1000:.0f} ms (SQL {median['sql_seconds'] * 1000:.0f} ms; "
            f"each: {each}), "
            f"{median['queries']:.0f} queries, {median['claims']:.0f} claims, "
            f"blocks {median['blocks']:.0f} (read from the OS {median['blocks_read']:.0f}), "
            f"tup_returned {median['tup_returned']:.0f}, tup_fetched {median['tup_fetched']:.0f}; "
            f"load {load()}"
        )
        if args.queries:
            for seconds, sql in sorted(runs[-1]["statements"], reverse=True)[:12]:
                print(f"      {seconds * 1000:7.1f} ms  {sql[:300]}")
    print("  per 1,000 mailboxes (median run / N x 1,000):")
    for count, _free, median in rows:
        per = 1000 / count
        print(
            f"    {count:>6}: {median['seconds'] * 1000 * per:.1f} ms, "
            f"{median['blocks'] * per:.0f} blocks, {median['tup_returned'] * per:.0f} rows "
            f"returned, {median['tup_fetched'] * per:.0f} fetched, "
            f"{median['queries'] * per:.1f} queries; per claim "
            f"{median['seconds'] * 1000 / max(median['claims'], 1):.1f} ms"
        )
    conn.close()


if __name__ == "__main__":
    main()
