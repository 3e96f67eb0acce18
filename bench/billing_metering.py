"""Metering throughput: billing.usage.usage_record_increment under concurrent
senders, against the floor of a bare single-row UPDATE ... + 1 by primary key (a
prepared statement, no ORM) in the same run.

Goal: metering costs at most ~1.5x the bare UPDATE (it is one statement per send: an
UPDATE of one of the period's count shards, found through the period's record), and no
increment is lost. The floor is one row, as the count was before it had shards: its
senders queue on its lock, where the service's sends spread over COUNTER_SHARDS rows.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/outreach_bench \
      .venv/bin/python bench/billing_metering.py

It creates and drops its own test database (test_<name>); nothing else is touched.
"""

import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings_test")

import django  # noqa: E402

django.setup()

from django.db import connection, connections  # noqa: E402
from django.test.utils import setup_databases, teardown_databases  # noqa: E402

THREADS = int(os.environ.get("BENCH_THREADS", "4"))
PER_THREAD = int(os.environ.get("BENCH_PER_THREAD", "500"))


def run_threads(work) -> float:
    barrier = threading.Barrier(THREADS + 1)

    def body():
        barrier.wait()
        try:
            for _ in range(PER_THREAD):
                work()
        finally:
            connections.close_all()

    threads = [threading.Thread(target=body) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    return time.perf_counter() - started


def main() -> None:
    config = setup_databases(verbosity=0, interactive=False)
    try:
        from accounts.models import Account
        from billing.models import UsageCount, UsageRecord
        from billing.usage import usage_record_current, usage_record_increment
        from plans.models import Plan

        free = Plan.objects.get(slug="free")
        baseline_account = Account.objects.create(email="floor@bench.example", plan=free)
        floor_record = usage_record_current(account=baseline_account)
        floor_row = UsageCount.objects.create(record=floor_record, shard=0)
        service_account = Account.objects.create(email="metered@bench.example", plan=free)

        # The floor: the cheapest way to count a send, one prepared single-row UPDATE by
        # primary key with no period to work out (the ORM's UPDATE costs more Python
        # than the statement itself).
        floor_sql = "UPDATE billing_usagecount SET sends = sends + 1 WHERE id = %s"

        def bare_update():
            with connection.cursor() as cursor:
                cursor.execute(floor_sql, [floor_row.pk])

        def metered():
            usage_record_increment(account=service_account)

        floor = run_threads(bare_update)
        service = run_threads(metered)
        total = THREADS * PER_THREAD
        counted = sum(
            UsageRecord.objects.filter(account=service_account).values_list(
                "sends_count", flat=True
            )
        )
        print(f"{THREADS} threads x {PER_THREAD} sends = {total}")
        print(f"bare UPDATE            {total / floor:8.0f} sends/s")
        print(f"usage_record_increment {total / service:8.0f} sends/s")
        print(f"ratio (service/floor time) {service / floor:.2f}; counted {counted}/{total}")
        if counted != total:
            sys.exit("LOST INCREMENTS")
    finally:
        teardown_databases(config, verbosity=0)


if __name__ == "__main__":
    main()
