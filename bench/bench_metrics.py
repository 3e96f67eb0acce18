"""GET /metrics at scale: which numbers to keep where (bench/README.md, "Metrics").

Builds, in the database of DATABASE_URL (a scratch one: the script makes its rows and
removes them), 1,000,000 enrollments (10 campaigns x 100,000 contacts; 50,000 due now,
50,000 due later, the rest completed) and 100,000 pending webhook delivery jobs (with
their events). Then, for a scrape:

1. the state gauges read at scrape time by their indexed queries (outreach.metrics,
   webhooks.metrics), and the whole GET /metrics through Django, 20 times each;
2. the alternative for counters: counting the same outcomes from the database at
   scrape time (enrollments by status, delivery jobs by state: what "sends by
   outcome" and "deliveries by outcome" would cost without process-side counters);
3. the multi-process mode's read: PROCESSES processes (8: the README's production
   layout of 4 web workers, 3 Celery workers and beat; 16: the same after a restart of
   each without emptying the folder) each write a full set of series
   (every send outcome and auth method, 60 routes x 3 methods x 4 status codes, a
   duration histogram per route) to a multi-process folder, and the scrape adds them up.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/outreach_bench \\
      .venv/bin/python bench/bench_metrics.py [PROCESSES ...]   # default: 8 16
"""

import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

FOLDER = Path(tempfile.mkdtemp(prefix="bench-metrics-"))
# Read by the Prometheus client library when it is first imported (by the settings'
# apps): this process scrapes the folder the writer processes fill.
os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(FOLDER)
os.environ.setdefault("METRICS_TOKEN", "bench-token")

import _setup  # noqa: E402

ENROLLMENTS_PER_CAMPAIGN = 100_000
CAMPAIGNS = 10
JOBS = 100_000
RUNS = 20

WRITER = """
import os, sys
os.environ["PROMETHEUS_MULTIPROC_DIR"] = sys.argv[1]
from config import metrics
for outcome in metrics.SEND_OUTCOMES:
    for method in metrics.AUTH_METHODS:
        metrics.sends.labels(outcome, method).inc(3)
for second in (0.5, 3, 40, 700, 5000):
    metrics.send_lateness.observe(second)
    metrics.webhook_latency.observe(second)
for route in range(60):
    for method in ("GET", "POST", "PATCH"):
        for status in ("200", "201", "404", "422"):
            metrics.http_requests.labels(f"route{route}/<pk>", method, status).inc()
    metrics.http_duration.labels(f"route{route}/<pk>").observe(0.02)
metrics.smtp_sessions.inc()
"""


def _timed(function, runs: int = RUNS) -> tuple[float, float]:
    """Median and worst of `runs` calls, in milliseconds."""
    took = []
    for _ in range(runs):
        started = time.perf_counter()
        function()
        took.append((time.perf_counter() - started) * 1000)
    return statistics.median(took), max(took)


def build(account) -> None:
    from django.db import connection
    from django.utils import timezone

    from outreach.models.campaigns import Campaign
    from webhooks.models import Webhook

    started = time.perf_counter()
    campaigns = [
        Campaign.objects.create(account=account, name=f"bench {i}") for i in range(CAMPAIGNS)
    ]
    _setup.contacts_create(account, ENROLLMENTS_PER_CAMPAIGN)
    webhook = Webhook.objects.create(
        account=account, url="https://hooks.example.com/in", event_filters=["*"], secret="whsec_x"
    )
    with connection.cursor() as cursor:
        for index, campaign in enumerate(campaigns):
            # Campaign 0: due now; campaign 1: due in an hour; the rest completed.
            now = timezone.now()
            status, due = {
                0: ("scheduled", now - timedelta(minutes=10)),
                1: ("sent", now + timedelta(hours=1)),
            }.get(index, ("completed", None))
            cursor.execute(
                """
                INSERT INTO outreach_enrollment (id, status, current_step, next_send_at,
                    send_attempts, last_error, created_at, updated_at, campaign_id, contact_id,
                    stop_reason, variants, bounced_on, opened_on, replied_on)
                SELECT gen_random_uuid(), %s, 1, %s, 0, '', now(), now(), %s, c.id, '',
                    '{}', '', '', ''
                FROM outreach_contact AS c WHERE c.account_id = %s
                """,
                [status, due, campaign.pk, account.pk],
            )
        cursor.execute(
            """
            INSERT INTO webhooks_event (id, account_id, type, data, created_at)
            SELECT gen_random_uuid(), %s, 'enrollment.sent', '{}'::json, now()
            FROM generate_series(1, %s)
            """,
            [account.pk, JOBS],
        )
        cursor.execute(
            """
            INSERT INTO webhooks_deliveryjob (id, event_id, webhook_id, state, attempts,
                next_attempt_at, created_at)
            SELECT gen_random_uuid(), e.id, %s, 'pending', 0,
                now() - random() * interval '5 minutes', now()
            FROM webhooks_event AS e WHERE e.account_id = %s
            """,
            [webhook.pk, account.pk],
        )
        cursor.execute("ANALYZE outreach_enrollment")
        cursor.execute("ANALYZE webhooks_deliveryjob")
    print(f"built in {time.perf_counter() - started:.1f} s")


def drop(account) -> None:
    from webhooks.models import DeliveryJob, Event, Webhook

    for queryset in (
        DeliveryJob.objects.filter(webhook__account=account),
        Event.objects.filter(account=account),
        Webhook.objects.filter(account=account),
    ):
        queryset._raw_delete(queryset.db)
    _setup.account_drop(account)


def writers_run(processes: int) -> None:
    for _ in range(processes):
        subprocess.run(
            [sys.executable, "-c", WRITER, str(FOLDER)],
            cwd=_setup.ROOT,
            env={**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings"},
            check=True,
        )


def main() -> None:
    from django.db import connection
    from django.test import Client
    from prometheus_client import generate_latest
    from prometheus_client.multiprocess import MultiProcessCollector

    from outreach.metrics import outreach_state_read
    from webhooks.metrics import webhook_state_read

    counts = [int(arg) for arg in sys.argv[1:]] or [8, 16]
    _setup.prepare()
    account = _setup.account_create("metrics")
    try:
        build(account)

        def state() -> None:
            list(outreach_state_read())
            list(webhook_state_read())

        def counted_from_database() -> None:
            with connection.cursor() as cursor:
                cursor.execute("SELECT status, count(*) FROM outreach_enrollment GROUP BY status")
                cursor.fetchall()
                cursor.execute("SELECT state, count(*) FROM webhooks_deliveryjob GROUP BY state")
                cursor.fetchall()

        def multiprocess_read() -> None:
            generate_latest(MultiProcessCollector(None, path=str(FOLDER)))

        client = Client()
        headers = {"HTTP_AUTHORIZATION": f"Bearer {os.environ['METRICS_TOKEN']}"}

        def scrape() -> None:
            response = client.get("/metrics", **headers)
            assert response.status_code == 200

        state()  # warm the caches once, as a running server's are
        for name, function in (
            ("state gauges (indexed queries)", state),
            ("counting outcomes from the database", counted_from_database),
        ):
            median, worst = _timed(function)
            print(f"{name:42} median {median:7.1f} ms   worst {worst:7.1f} ms")
        written = 0
        for processes in counts:
            writers_run(processes - written)
            written = processes
            files = len(list(FOLDER.iterdir()))
            lines = generate_latest(MultiProcessCollector(None, path=str(FOLDER))).count(b"\n")
            print(f"multi-process folder: {processes} processes, {files} files, {lines} lines")
            for name, function in (
                ("multi-process files, read and rendered", multiprocess_read),
                ("GET /metrics, whole", scrape),
            ):
                median, worst = _timed(function)
                print(f"{name:42} median {median:7.1f} ms   worst {worst:7.1f} ms")
    finally:
        drop(account)
        for path in FOLDER.iterdir():
            path.unlink()
        FOLDER.rmdir()


if __name__ == "__main__":
    main()
