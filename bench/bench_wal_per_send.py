"""Benchmark: the database's cost of one send, in process: WAL bytes and commits.

    DATABASE_URL=postgres://... REDIS_URL=redis://... \
        .venv/bin/python bench/bench_wal_per_send.py [--sends 1000] [--mailboxes 100] \
        [--checkpoint]

The fleet's shape without its clock: `--mailboxes` mailboxes on a local SMTP sink
(tests/support/smtp.py, its own process), one two-step campaign with one webhook (each
send writes its event and a delivery job), `--sends` enrollments due at once, each
mailbox sending its share. Scheduler runs claim them (claims of up to
SENDING_BATCH_SIZE per transaction), then `batch_send` sends each batch, one after
the other, in this process. Between the first run and the last record:

- the bench database's own WAL, read with pg_walinspect (`pg_get_wal_records_info`
  over the LSNs of the run): the records touching its relations and the records of the
  transactions that wrote them (their commits), with and without full-page images (an
  image follows a page's first change after a checkpoint, so it depends on when the
  cluster's checkpoint falls); the cluster's WAL (`pg_current_wal_lsn`) is printed too
  but counts the other databases of a shared server;
- its writing commits (the commit records of those transactions) and every commit
  (`pg_stat_database.xact_commit`, read-only autocommit statements included);
- the same own WAL per relation (each record counted under the relation of its first
  block; commits under "(commit)"), per send, with its record types: where a send's
  bytes go, e.g. a row LOCK, an UPDATE that wrote index entries, a HOT_UPDATE that did
  not, an index's INSERT_LEAF.

The tables a send writes are compacted first (VACUUM FULL; the bench's database holds
nothing else): the run's rows go into fresh pages, as the new rows of a table that only
grows do (the attempts, the messages, the outbox) and as enrollments created in bulk
are. Without it, the space left by an earlier run's deleted rows lets updates stay on
their page, and a run measured less than a service in production writes.

`--checkpoint` runs a CHECKPOINT right before the measured run: every page's first
change after it writes a full-page image, as in the minutes after each checkpoint of a
server (checkpoint_timeout); the images' share is then the most a checkpoint adds.
Without it, the images depend on when the server's own checkpoint falls. To see what
wal_compression would do to them, set it for the run's own sessions (a superuser may):
`PGOPTIONS='-c wal_compression=lz4'` (or pglz, zstd, as the server was built).

Needs a superuser (pg_walinspect, VACUUM FULL, CHECKPOINT) and a database of its own.
"""

import argparse
import os
import sys
import time
from datetime import timedelta

# Webhook delivery tasks go to the broker as in production, not run inline.
os.environ["CELERY_TASK_ALWAYS_EAGER"] = "false"
os.environ["OUTBOUND_ALLOW_PRIVATE_NETWORKS"] = "true"  # the sink is on loopback

from _peers import broker_purge, process_stop, smtp_sink_start  # noqa: E402
from _setup import (  # noqa: E402
    account_create,
    account_drop,
    contacts_create,
    mailboxes_create,
    prepare,
    step_create,
)

# The records of the run's writing transactions, and of nothing else: those whose
# blocks are in this database, and every record (the commit) of a transaction that
# wrote one.
_OWN_WAL = """
WITH rec AS (
    SELECT * FROM pg_get_wal_records_info(%(start)s::pg_lsn, %(end)s::pg_lsn)
),
mine AS (
    SELECT DISTINCT xid FROM rec WHERE block_ref LIKE %(db)s AND xid <> '0'
)
SELECT count(*) FILTER (WHERE resource_manager = 'Transaction' AND record_type = 'COMMIT'),
    coalesce(sum(record_length), 0), coalesce(sum(fpi_length), 0)
FROM rec
WHERE block_ref LIKE %(db)s OR xid IN (SELECT xid FROM mine)
"""


# The full-page images among the own records: how many, and the bytes compression saved
# on them (each image's "compression saved" in its block reference; none without
# wal_compression).
_OWN_IMAGES = """
WITH rec AS (
    SELECT * FROM pg_get_wal_records_info(%(start)s::pg_lsn, %(end)s::pg_lsn)
),
mine AS (
    SELECT DISTINCT xid FROM rec WHERE block_ref LIKE %(db)s AND xid <> '0'
),
own AS (
    SELECT block_ref FROM rec WHERE block_ref LIKE %(db)s OR xid IN (SELECT xid FROM mine)
)
SELECT (SELECT count(*) FROM own, regexp_matches(own.block_ref, 'FPW', 'g')),
    (SELECT coalesce(sum(m[1]::bigint), 0)
     FROM own, regexp_matches(own.block_ref, 'compression saved: (\\d+)', 'g') AS m)
"""


# The own records above, per relation (of the record's first block; the relation's
# name from its relfilenode) and record type: bytes with full-page images, images alone.
_OWN_WAL_BY_RELATION = """
WITH rec AS (
    SELECT * FROM pg_get_wal_records_info(%(start)s::pg_lsn, %(end)s::pg_lsn)
),
mine AS (
    SELECT DISTINCT xid FROM rec WHERE block_ref LIKE %(db)s AND xid <> '0'
),
own AS (
    SELECT *, substring(block_ref FROM 'rel \\d+/\\d+/(\\d+)')::oid AS node
    FROM rec WHERE block_ref LIKE %(db)s OR xid IN (SELECT xid FROM mine)
)
SELECT coalesce(c.relname, CASE WHEN own.node IS NULL THEN '(commit)' ELSE '(other)' END),
    own.resource_manager || ' ' || own.record_type, count(*), sum(own.record_length),
    sum(own.fpi_length)
FROM own LEFT JOIN pg_class AS c ON c.relfilenode = own.node AND own.node <> 0
GROUP BY 1, 2
"""


def _by_relation(rows, sends: int) -> list[str]:
    """Lines of the per-relation table: bytes per send (images apart), the record types
    per send with their mean size without images, largest first."""
    relations: dict = {}
    for relation, kind, records, total, fpi in rows:
        entry = relations.setdefault(relation, [0, 0, []])
        entry[0] += total
        entry[1] += fpi
        entry[2].append((records, kind, (total - fpi) / records))
    lines = [f"{'relation':<44} {'B/send':>7} {'FPI':>6}  records per send x bytes each"]
    for relation, (total, fpi, kinds) in sorted(relations.items(), key=lambda r: -r[1][0]):
        if total / sends < 1:
            continue
        kinds = ", ".join(
            f"{kind.split(' ', 1)[1]} {records / sends:.2f}x{size:.0f}"
            for records, kind, size in sorted(kinds, reverse=True)
            if records / sends >= 0.01
        )
        lines.append(f"{relation:<44} {total / sends:>7.0f} {fpi / sends:>6.0f}  {kinds}")
    return lines


def _counters(cursor) -> tuple[str, int]:
    cursor.execute("SELECT pg_stat_force_next_flush()")
    cursor.execute(
        "SELECT pg_current_wal_flush_lsn(), xact_commit FROM pg_stat_database "
        "WHERE datname = current_database()"
    )
    return cursor.fetchone()


# What a send writes (and the scheduler's reads lock): compacted before each run.
_TABLES = (
    "outreach_enrollment",
    "outreach_sendclaim",
    "outreach_message",
    "outreach_smtpcredential",
    "outreach_credentialcampaignstats",
    "outreach_campaignstats",
    "outreach_stepvariantstats",
    "billing_usagerecord",
    "billing_usagecount",
    "webhooks_event",
    "webhooks_deliveryjob",
)


def main(sends: int, mailbox_count: int, checkpoint: bool) -> None:
    # Long: set-up, the measured run and the report, read top to bottom.
    prepare()
    from django.db import connection
    from django.utils import timezone

    from outreach.models.campaigns import Campaign, CampaignStep
    from outreach.models.sending import Enrollment, Message
    from outreach.sending.scheduler import schedule_due
    from outreach.sending.send import batch_send
    from tests.support.ports import free_port
    from webhooks.models import Event, Webhook
    from webhooks.secrets import secret_generate

    with connection.cursor() as cursor:
        cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
        for table in _TABLES:
            cursor.execute(f"VACUUM FULL {table}")
        cursor.execute("SHOW wal_compression")
        compression = cursor.fetchone()[0]
        cursor.execute("SELECT oid FROM pg_database WHERE datname = current_database()")
        db_oid = cursor.fetchone()[0]
    port = free_port()
    sink = smtp_sink_start(port=port)
    account = account_create("wal", plan="scale")
    try:
        credentials = mailboxes_create(
            account, mailbox_count, port=port, min_interval_seconds=0, max_interval_seconds=0
        )
        campaign = Campaign.objects.create(
            account=account, name="bench", status=Campaign.Status.ACTIVE
        )
        campaign.credentials.add(*credentials)
        step_create(campaign)
        CampaignStep.objects.create(
            campaign=campaign, position=2, delay_minutes=24 * 60, subject="", body_text="Bump"
        )
        Webhook.objects.create(
            account=account,
            url="http://127.0.0.1:9/never",
            event_filters=["*"],
            secret=secret_generate(),
        )
        contacts = contacts_create(account, sends)
        due = timezone.now() - timedelta(seconds=1)
        Enrollment.objects.bulk_create(
            Enrollment(
                campaign=campaign,
                contact=c,
                status=Enrollment.Status.SCHEDULED,
                next_send_at=due,
            )
            for c in contacts
        )
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
        time.sleep(1)
        with connection.cursor() as cursor:
            if checkpoint:
                cursor.execute("CHECKPOINT")
            start_lsn, start_commits = _counters(cursor)
        started = time.perf_counter()
        sent = 0
        while True:
            batches = schedule_due(now=timezone.now())
            if not batches:
                break
            for batch in batches:
                sent += batch_send(batch_id=batch.batch_id, credential_id=batch.credential_id).sent
        seconds = time.perf_counter() - started
        time.sleep(1)  # the statistics of the last transactions reach pg_stat_database
        with connection.cursor() as cursor:
            end_lsn, end_commits = _counters(cursor)
            cursor.execute("SELECT %s::pg_lsn - %s::pg_lsn", [end_lsn, start_lsn])
            cluster = int(cursor.fetchone()[0])
            cursor.execute(_OWN_WAL, {"start": start_lsn, "end": end_lsn, "db": f"%/{db_oid}/%"})
            commits, own, fpi = cursor.fetchone()
            cursor.execute(
                _OWN_WAL_BY_RELATION, {"start": start_lsn, "end": end_lsn, "db": f"%/{db_oid}/%"}
            )
            by_relation = cursor.fetchall()
            cursor.execute(_OWN_IMAGES, {"start": start_lsn, "end": end_lsn, "db": f"%/{db_oid}/%"})
            images, saved = cursor.fetchone()
        assert sent == sends, f"sent {sent} of {sends}"
        assert Message.objects.filter(account=account).count() == sends
        print(
            f"{sends} sends from {mailbox_count} mailboxes in {seconds:.1f} s "
            f"(wal_compression {compression}{', after a CHECKPOINT' if checkpoint else ''})"
        )
        print(
            f"own WAL per send: {own / sends / 1024:.2f} KiB "
            f"({(own - fpi) / sends / 1024:.2f} KiB without full-page images); "
            f"cluster WAL per send: {cluster / sends / 1024:.2f} KiB"
        )
        if images:
            print(
                f"full-page images: {images} ({fpi / images:.0f} B each as written, "
                f"{(fpi + saved) / images:.0f} B before compression; "
                f"{(fpi + saved) / sends / 1024:.2f} KiB per send before compression)"
            )
        print(
            f"writing commits per send: {commits / sends:.2f}; "
            f"xact_commit per send: {(end_commits - start_commits) / sends:.2f}"
        )
        print("\nown WAL per relation (bytes per send, with full-page images; FPI alone):")
        print("\n".join(_by_relation(by_relation, sends)))
    finally:
        process_stop(sink)
        Event.objects.filter(account=account).delete()
        Message.objects.filter(account=account).delete()
        account_drop(account)
        broker_purge()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sends", type=int, default=1000)
    parser.add_argument("--mailboxes", type=int, default=100)
    parser.add_argument(
        "--checkpoint", action="store_true", help="CHECKPOINT right before the measured run"
    )
    args = parser.parse_args()
    main(args.sends, args.mailboxes, args.checkpoint)
    sys.exit(0)
