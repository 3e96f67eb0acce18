"""What the scheduler's sweep of suppressed contacts (outreach.sending.recovery's
`suppressed_end`, run at every scheduler run) costs beside a large backlog of due
threads, in process, against DATABASE_URL.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/outreach_bench \\
      .venv/bin/python bench/bench_suppressed_end.py --due 200000 --runs 30

The world (built once, kept between invocations unless `--rebuild`; `--drop` deletes
it): one account (scale plan), `--mailboxes` (500) mailboxes, `--campaigns` (200)
campaigns, `--due` contacts each enrolled once and due (next_send_at an hour ago; half
new threads, `scheduled` without a mailbox, half follow-ups, `sent` in a mailbox's
thread: the backlog of threads waiting for their mailboxes' pace). Beside it, the
suppressions a platform has: 2,000 contacts bounced a month ago whose enrollments ended
then, and 20 bounced a month ago whose enrollment's next step is two days ahead (not due
yet). VACUUM ANALYZE.

Per invocation, after `--warm` runs (the sweep's state, where it keeps one, caught up):
* quiet runs (`--runs`): nothing suppressed since the last run, the common case; the
  median and p90 wall time of `suppressed_end(now=...)`, its queries and their SQL time;
* ending runs (`--ending-runs`, 5): `--suppressed` (5) contacts of due enrollments are
  bounced elsewhere just before the run (their rows written as a bounce writes them),
  the run ends them; the same figures;
* EXPLAIN (ANALYZE, BUFFERS) of each statement of one quiet run, rolled back.
"""

import argparse
import statistics
import time
from datetime import timedelta

from _setup import account_create, contacts_create, mailboxes_create, prepare

LABEL = "suppend"


def world(args) -> None:
    from django.db import connection
    from django.utils import timezone

    from outreach.models.campaigns import Campaign
    from outreach.models.contacts import Contact
    from outreach.models.sending import Enrollment

    account = account_create(LABEL, plan="scale")
    mailboxes = mailboxes_create(account, args.mailboxes, port=2525)
    campaigns = Campaign.objects.bulk_create(
        Campaign(account=account, name=f"backlog {n}", status=Campaign.Status.ACTIVE)
        for n in range(args.campaigns)
    )
    now = timezone.now()
    due = now - timedelta(hours=1)
    month_ago = now - timedelta(days=30)
    extra = 2000 + 20
    chunk = 20000
    for start in range(0, args.due + extra, chunk):
        count = min(chunk, args.due + extra - start)
        contacts = contacts_create(account, count, start=start)
        rows = []
        for i, contact in enumerate(contacts, start=start):
            campaign = campaigns[i % len(campaigns)]
            if i >= args.due + 20:  # bounced a month ago, the enrollment ended then
                rows.append(
                    Enrollment(
                        campaign=campaign,
                        contact=contact,
                        status=Enrollment.Status.BOUNCED,
                        bounced_at=month_ago,
                        credential=mailboxes[i % len(mailboxes)],
                    )
                )
            elif i >= args.due:  # bounced a month ago elsewhere, its next step not due yet
                rows.append(
                    Enrollment(
                        campaign=campaign,
                        contact=contact,
                        status=Enrollment.Status.SENT,
                        next_send_at=now + timedelta(days=2),
                        credential=mailboxes[i % len(mailboxes)],
                    )
                )
            elif i % 2:
                rows.append(
                    Enrollment(
                        campaign=campaign,
                        contact=contact,
                        status=Enrollment.Status.SENT,
                        current_step=1,
                        next_send_at=due,
                        credential=mailboxes[i % len(mailboxes)],
                    )
                )
            else:
                rows.append(
                    Enrollment(
                        campaign=campaign,
                        contact=contact,
                        status=Enrollment.Status.SCHEDULED,
                        next_send_at=due,
                    )
                )
        Enrollment.objects.bulk_create(rows, batch_size=5000)
    Contact.objects.filter(
        account=account,
        email_lower__in=[f"r{i}@bench.example" for i in range(args.due, args.due + extra)],
    ).update(bounced_at=month_ago, updated_at=month_ago)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE outreach_enrollment, outreach_contact, outreach_sendclaim")


def account_get():
    from accounts.models import Account

    return Account.objects.filter(email__startswith=f"bench-{LABEL}-").first()


def drop() -> None:
    from _setup import account_drop

    from accounts.models import Account

    for account in Account.objects.filter(email__startswith=f"bench-{LABEL}-"):
        account_drop(account)


def one_run(now) -> dict:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from outreach.sending.recovery import suppressed_end

    with CaptureQueriesContext(connection) as queries:
        started = time.perf_counter()
        ended = suppressed_end(now=now)
        seconds = time.perf_counter() - started
    return {
        "seconds": seconds,
        "ended": ended,
        "queries": len(queries),
        "sql_seconds": sum(float(q["time"]) for q in queries.captured_queries),
        "statements": [q["sql"] for q in queries.captured_queries],
    }


def suppress(account, count: int, taken: set) -> None:
    """`count` contacts of due enrollments bounced elsewhere now, as the bounce writes
    them (outreach.sending.bounces: bounced_at and updated_at)."""
    from django.utils import timezone

    from outreach.models.contacts import Contact
    from outreach.models.sending import Enrollment

    ids = list(
        Enrollment.objects.filter(
            campaign__account=account,
            status__in=Enrollment.DUE_STATUSES,
            contact__bounced_at__isnull=True,
        )
        .exclude(contact_id__in=taken)
        .values_list("contact_id", flat=True)[:count]
    )
    taken.update(ids)
    at = timezone.now()
    Contact.objects.filter(pk__in=ids).update(bounced_at=at, updated_at=at)


def explain(statements: list) -> None:
    from django.db import connection, transaction

    with transaction.atomic(), connection.cursor() as cursor:
        for sql in statements:
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql)
            print("    " + sql[:200].replace("\n", " "))
            for (line,) in cursor.fetchall():
                print(f"      {line}")
        transaction.set_rollback(True)


def summary(name: str, runs: list) -> None:
    ms = sorted(r["seconds"] * 1000 for r in runs)
    sql = statistics.median(r["sql_seconds"] * 1000 for r in runs)
    p90 = ms[min(len(ms) - 1, int(len(ms) * 0.9))]
    print(
        f"  {name}: {len(runs)} runs, median {statistics.median(ms):.2f} ms, p90 {p90:.2f} ms,"
        f" SQL median {sql:.2f} ms, queries {sorted({r['queries'] for r in runs})},"
        f" ended {sorted({r['ended'] for r in runs})}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--due", type=int, default=200_000)
    parser.add_argument("--mailboxes", type=int, default=500)
    parser.add_argument("--campaigns", type=int, default=200)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--warm", type=int, default=3)
    parser.add_argument("--ending-runs", type=int, default=5)
    parser.add_argument("--suppressed", type=int, default=5)
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--drop", action="store_true")
    parser.add_argument("--migrate", action="store_true", help="migrate first")
    args = parser.parse_args()
    from django.db import connection
    from django.utils import timezone

    if args.migrate or args.rebuild:
        prepare()
    if args.drop or args.rebuild:
        drop()
        if args.drop:
            return
    account = account_get()
    if account is None:
        started = time.perf_counter()
        world(args)
        account = account_get()
        print(f"world built in {time.perf_counter() - started:.1f} s")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM outreach_enrollment e JOIN outreach_campaign c"
            " ON c.id = e.campaign_id WHERE c.account_id = %s"
            " AND e.status IN ('scheduled', 'sent') AND e.next_send_at <= now()",
            [account.pk],
        )
        print(f"due enrollments: {cursor.fetchone()[0]}")
    for _ in range(args.warm):
        one_run(timezone.now())
    quiet = [one_run(timezone.now()) for _ in range(args.runs)]
    summary("quiet", quiet)
    taken: set = set()
    ending = []
    for _ in range(args.ending_runs):
        suppress(account, args.suppressed, taken)
        ending.append(one_run(timezone.now()))
        one_run(timezone.now())  # the state caught up again
    summary("ending", ending)
    print("  EXPLAIN (ANALYZE, BUFFERS) of a quiet run's statements:")
    explain(one_run(timezone.now())["statements"])


if __name__ == "__main__":
    main()
