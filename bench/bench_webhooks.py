"""Webhook delivery throughput: one Celery worker process vs. a plain loop.

Both send the same signed envelopes to the same local receiver (a separate
process answering 200 at once, keep-alive):

* baseline: a loop of signed POSTs over one requests.Session, nothing else;
* service: N events emitted in one transaction (one enabled webhook), delivered
  by ONE worker process (`celery worker --pool solo`) through the whole engine:
  claim (conditional UPDATE), SSRF-guarded connect, signed POST, attempt row,
  job state; measured from the commit until the last job is `succeeded`.

Goal: the service reaches at least 50% of the baseline's deliveries per second.
Needs PostgreSQL and Redis:

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/outreach_bench \\
    REDIS_URL=redis://127.0.0.1:6379/3 .venv/bin/python bench/bench_webhooks.py [--events 1000 --rounds 5]

It migrates that database and empties the Redis database's queues.
"""

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("SECRET_KEY", "bench-only-secret-key-0000000000000000000000000000000000")
os.environ.setdefault("FIELD_ENCRYPTION_KEY", "YmVuY2gtb25seS1maWVsZC1rZXktMDAwMDAwMDAwMDA=")
os.environ["WEBHOOK_ALLOW_PRIVATE_NETWORKS"] = "true"  # the receiver is on loopback
os.environ["CELERY_TASK_ALWAYS_EAGER"] = "false"
os.environ.setdefault("LOG_LEVEL", "WARNING")


def start_receiver() -> tuple[subprocess.Popen, str]:
    from _peers import receiver_start

    from tests.support.ports import free_port

    port = free_port()
    return receiver_start(ports=[port]), f"http://127.0.0.1:{port}/hook"


def start_worker(log_path: Path) -> subprocess.Popen:
    command = [
        str(Path(sys.executable).with_name("celery")),
        "-A",
        "config",
        "worker",
        "--pool",
        "solo",
        "-Q",
        "webhooks",
        "--loglevel",
        "INFO",
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
    ]
    log = open(log_path, "wb")  # noqa: SIM115 (lives as long as the worker)
    # The worker says " ready." at INFO, which the project's LOG_LEVEL (this process's
    # WARNING) would drop: the worker keeps the level its command asks for.
    env = {**os.environ, "LOG_LEVEL": "INFO"}
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if " ready." in log_path.read_text(errors="replace"):
            return process
        if process.poll() is not None:
            break
        time.sleep(0.1)
    raise SystemExit(f"worker did not start:\n{log_path.read_text(errors='replace')[-3000:]}")


def baseline(url: str, secret: str, n: int, account_id: str) -> float:
    import requests
    from _peers import signed_envelope

    session = requests.Session()
    started = time.perf_counter()
    for i in range(n):
        body, headers = signed_envelope(secret=secret, account_id=account_id, data={"n": i})
        response = session.post(url, data=body, headers=headers, timeout=10)
        response.raise_for_status()
    return n / (time.perf_counter() - started)


def service(account, n: int) -> tuple[float, float]:
    """(worker deliveries/s, end-to-end deliveries/s).

    The events are emitted first, then the drain is rung once. The worker's
    rate spans its first to its last attempt (start times the worker wrote);
    the end-to-end rate runs from the emitting transaction's start to the last
    `succeeded`, emission included.
    """
    from django.db import transaction
    from django.db.models import Max, Min

    from webhooks.events import event_emit
    from webhooks.models import DeliveryJob, WebhookDelivery

    started = time.perf_counter()
    # Emit first, the drain rung once: the first emit rings it inside the transaction
    # (the others find it rung), its message goes out after the commit, and the worker
    # then delivers alone, as the plain loop does.
    with transaction.atomic():
        for i in range(n):
            event_emit(account=account, event_type="enrollment.sent", data={"n": i})
    jobs = DeliveryJob.objects.filter(webhook__account=account)
    while jobs.exclude(state="succeeded").exists():
        time.sleep(0.1)
    end_to_end = n / (time.perf_counter() - started)
    window = WebhookDelivery.objects.filter(job__in=jobs).aggregate(
        first=Min("created_at"), last=Max("created_at")
    )
    worker = (n - 1) / max((window["last"] - window["first"]).total_seconds(), 1e-6)
    jobs.delete()
    return worker, end_to_end


def fmt(rates: list[float]) -> str:
    return f"median {statistics.median(rates):7.1f} (min {min(rates):.1f}, max {max(rates):.1f})"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=1000, help="deliveries per run")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    if not (os.environ.get("DATABASE_URL") and os.environ.get("REDIS_URL")):
        raise SystemExit("set DATABASE_URL (PostgreSQL) and REDIS_URL")

    import django

    django.setup()
    import redis
    from _peers import process_stop
    from django.core.management import call_command

    from tests.accounts.factories import AccountFactory
    from webhooks.services import webhook_create

    call_command("migrate", verbosity=0)
    redis.Redis.from_url(os.environ["REDIS_URL"]).delete("webhooks", "unacked", "unacked_index")
    receiver, url = start_receiver()
    workdir = Path(tempfile.mkdtemp(prefix="bench-webhooks-"))
    worker = None
    account = AccountFactory(email=f"bench-{os.getpid()}-{time.time_ns()}@example.com")
    try:
        issued = webhook_create(account=account, url=url, event_filters=["*"])
        worker = start_worker(workdir / "worker.log")

        service(account, 50)  # warm-up: connections, imports, caches
        baseline(url, issued.secret, 200, str(account.id))

        # Interleaved rounds: the machine is shared, so load drifts; each round's
        # ratio compares two runs made back to back, and the median is reported.
        ratios, plains, engines, end_to_ends = [], [], [], []
        for _ in range(args.rounds):
            plain = baseline(url, issued.secret, args.events, str(account.id))
            engine, end_to_end = service(account, args.events)
            plains.append(plain)
            engines.append(engine)
            end_to_ends.append(end_to_end)
            ratios.append(engine / plain)
        ratio = statistics.median(ratios)
        print(f"events per run: {args.events}, rounds: {args.rounds}")
        print(f"plain loop (one requests.Session): {fmt(plains)} deliveries/s")
        print(f"service, one worker process:       {fmt(engines)} deliveries/s")
        print(f"  end to end, emission included:   {fmt(end_to_ends)} deliveries/s")
        print(f"ratio per round: {', '.join(f'{r:.0%}' for r in ratios)}")
        print(f"median ratio: {ratio:.0%} (goal >= 50%) -> {'PASS' if ratio >= 0.5 else 'FAIL'}")
    finally:
        if worker is not None:
            os.killpg(worker.pid, signal.SIGTERM)
            worker.wait(timeout=30)
        process_stop(receiver)
        account.delete()  # its webhook, events, jobs and attempt rows go with it


if __name__ == "__main__":
    main()
