"""Webhook delivery to slow and dead receivers: the service as deployed (the Procfile's
worker and beat) against plain HTTP clients at the same concurrency, in the same run.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/outreach_latbench \\
    REDIS_URL=redis://127.0.0.1:6379/6 \\
      .venv/bin/python bench/bench_latency_webhooks.py --timeout 300
    .venv/bin/python bench/bench_latency_webhooks.py --timeout 300   # the embedded mode

The world: 50 healthy endpoints, each on its own port of one receiver process
(tests/support/receiver.py), answering 200 after 200 ms; 2 dead endpoints (a second
receiver process) that read the request and never answer. One account per endpoint
with one webhook each (every customer should get its own fair share), 10 events per
account.

Baseline: one thread per healthy endpoint posting its 10 signed bodies one after the
other over a requests.Session (keep-alive); time from the start until all 500 were
answered. Its p95 is that of start -> received by the endpoint.

Service: the worker and beat started exactly as the Procfile's `worker:` and `beat:`
lines say, through a shell, with this process's environment (the production mode's
DATABASE_URL and REDIS_URL, or without them the embedded mode's: a fresh VAR_DIR, its
PostgreSQL started by this process, the filesystem broker; as in
bench_latency_sending.py); once the
worker is ready, the 520 events are emitted with webhooks.events.event_emit inside one
transaction (as producers do: the outbox rows commit with it and the drains are rung
after commit), account after account for event 1, then event 2, ... (the dead
endpoints' accounts are spread among the others). Measured from the commit until every
healthy endpoint has received all 10 (deduplicated on the envelope id) and was answered;
the per-event latency is commit -> received by the endpoint, its p95 over the healthy
endpoints' 500 events. The run stops waiting after --timeout seconds and reports what
was delivered. WEBHOOK_TIMEOUT_SECONDS is the service's default unless set.

Goals: the service's deliveries per second >= 50% of the baseline's; p95 < 2 s.
It migrates the database, empties the broker's queues and deletes the accounts it
made (bench-latency-webhooks-...@example.com) before and after.
"""

import argparse
import json
import math
import os
import tempfile
import threading
import time
from pathlib import Path

os.environ["CELERY_TASK_ALWAYS_EAGER"] = "false"  # drains go to the real broker
os.environ["WEBHOOK_ALLOW_PRIVATE_NETWORKS"] = "true"  # the receivers are on loopback

from _peers import (  # noqa: E402
    LineLog,
    Service,
    broker_purge,
    mode_environment,
    process_stop,
    receiver_start,
    service_describe,
    service_env,
    signed_envelope,
    sigterm_exits,
)

LABEL = "latency-webhooks"
# production or embedded: its environment set before Django is (_setup).
MODE = mode_environment(LABEL)

from _setup import account_create, prepare  # noqa: E402

GOAL_RATIO = 0.5
GOAL_P95 = 2.0


def p95(values: list[float], total: int) -> float:
    """95th percentile (nearest rank) of `total` latencies of which `values` are known;
    the missing ones count as infinite."""
    if total == 0:
        return float("nan")
    rank = math.ceil(0.95 * total)
    ordered = sorted(values)
    return ordered[rank - 1] if rank <= len(ordered) else float("inf")


def fmt_seconds(value: float) -> str:
    return "not reached" if math.isinf(value) else f"{value:.2f} s"


def distinct_ports(count: int, taken: set) -> list[int]:
    from tests.support.ports import free_port

    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if port not in taken and port not in ports:
            ports.append(port)
    return ports


def accounts_purge() -> None:
    from accounts.models import Account

    Account.objects.filter(email__startswith=f"bench-{LABEL}-").delete()


def parse_log(lines: list[str]) -> list[tuple[float, float | None, str]]:
    """(received, answered or None, envelope id) per receiver log line."""
    parsed = []
    for line in lines:
        received, answered, _port, _path, event_id = line.split(" ")
        parsed.append((float(received), None if answered == "-" else float(answered), event_id))
    return parsed


def baseline(endpoints: list[dict], events: int, log: LineLog) -> dict:
    """One thread and one requests.Session per healthy endpoint, started together."""
    import requests

    bodies = []
    for endpoint in endpoints:
        bodies.append(
            [
                signed_envelope(
                    secret=endpoint["secret"],
                    account_id=endpoint["account_id"],
                    data={"n": n, "endpoint": endpoint["port"]},
                )
                for n in range(events)
            ]
        )
    ids = {json.loads(body)["id"] for posts in bodies for body, _ in posts}
    barrier = threading.Barrier(len(endpoints) + 1)
    done_at: list[float] = []
    errors: list[str] = []

    def run(url, posts):
        session = requests.Session()
        barrier.wait()
        try:
            for body, headers in posts:
                session.post(url, data=body, headers=headers, timeout=30).raise_for_status()
            done_at.append(time.time())
        except requests.RequestException as exc:
            errors.append(f"{url}: {exc!r}")
        session.close()

    threads = [
        threading.Thread(target=run, args=(endpoint["url"], posts))
        for endpoint, posts in zip(endpoints, bodies, strict=True)
    ]
    log.skip()
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.time()
    for thread in threads:
        thread.join()
    received = {}
    for at, _answered, event_id in parse_log(log.read()):
        if event_id in ids:
            received.setdefault(event_id, at)
    total = len(endpoints) * events
    seconds = max(done_at) - started if len(done_at) == len(endpoints) else float("inf")
    return {
        "seconds": seconds,
        "rate": total / seconds,
        "p95": p95([at - started for at in received.values()], total),
        "errors": errors,
    }


def service_run(args, endpoints, dead, healthy_log: LineLog, dead_log: LineLog, workdir):
    from django.db import transaction
    from django.db.models import Count

    from webhooks.events import event_emit
    from webhooks.models import DeliveryJob

    # Dead endpoints' accounts spread evenly among the healthy ones.
    everyone = list(endpoints)
    for k, endpoint in enumerate(dead):
        everyone.insert(round(k * len(endpoints) / len(dead)) + k, endpoint)
    broker_purge()
    workdir.mkdir(parents=True, exist_ok=True)
    result: dict = {}
    with Service(workdir, service_env()) as service:
        service.start()
        healthy_log.skip()
        dead_log.skip()
        committed: list[float] = []
        with transaction.atomic():
            transaction.on_commit(lambda: committed.append(time.time()))  # runs first
            for n in range(args.events):
                for endpoint in everyone:
                    event_emit(
                        account=endpoint["account"],
                        event_type="enrollment.sent",
                        data={
                            "enrollment_id": f"00000000-0000-0000-0000-{n:012d}",
                            "contact_email": f"contact{n}@bench.example",
                            "status": "sent",
                            "n": n,
                        },
                    )
        commit = committed[0]
        expected = {
            str(job_id)
            for job_id in DeliveryJob.objects.filter(
                webhook_id__in=[e["webhook_id"] for e in endpoints]
            ).values_list("id", flat=True)
        }
        first: dict[str, tuple[float, float | None]] = {}
        dead_attempts = 0
        deadline = commit + args.timeout
        while True:
            for received, answered, event_id in parse_log(healthy_log.read()):
                if event_id in expected and event_id not in first:
                    first[event_id] = (received, answered)
            dead_attempts += len(dead_log.read())
            if len(first) == len(expected) and all(a for _, a in first.values()):
                waited = max(a for _, a in first.values()) - commit
                break
            if time.time() >= deadline or not service.alive():
                waited = time.time() - commit
                if not service.alive():
                    print("  a service process exited early; see its log")
                break
            time.sleep(0.05)
        # What the service had recorded when the measurement ended (before the stop).
        result["states"] = {
            kind: dict(
                DeliveryJob.objects.filter(webhook_id__in=[e["webhook_id"] for e in group])
                .order_by()
                .values_list("state")
                .annotate(n=Count("id"))
            )
            for kind, group in (("healthy", endpoints), ("dead", dead))
        }
    result.update(
        stopped_cleanly=service.stopped_cleanly,
        expected=len(expected),
        delivered=len(first),
        waited=waited,
        complete=len(first) == len(expected),
        latencies=[received - commit for received, _ in first.values()],
        dead_attempts=dead_attempts,
    )
    print(f"  logs: {workdir}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--endpoints", type=int, default=50, help="healthy endpoints")
    parser.add_argument("--dead", type=int, default=2, help="endpoints that never answer")
    parser.add_argument("--events", type=int, default=10, help="per account")
    parser.add_argument("--delay", type=float, default=0.2, help="healthy answer delay (s)")
    parser.add_argument("--timeout", type=float, default=300)
    args = parser.parse_args()
    sigterm_exits()
    prepare()
    accounts_purge()
    from webhooks.services import webhook_create

    workdir = Path(tempfile.mkdtemp(prefix="bench-latency-webhooks-"))
    healthy_ports = distinct_ports(args.endpoints, set())
    dead_ports = distinct_ports(args.dead, set(healthy_ports))
    healthy_log, dead_log = LineLog(workdir / "healthy.log"), LineLog(workdir / "dead.log")
    receivers = []
    try:
        receivers.append(
            receiver_start(ports=healthy_ports, log=healthy_log.path, delay=args.delay)
        )
        if dead_ports:
            receivers.append(receiver_start(ports=dead_ports, log=dead_log.path, hang=True))
        endpoints, dead = [], []
        for kind, ports, bucket in (("ok", healthy_ports, endpoints), ("dead", dead_ports, dead)):
            for i, port in enumerate(ports):
                account = account_create(f"{LABEL}-{kind}{i}")
                url = f"http://127.0.0.1:{port}/hook"
                issued = webhook_create(account=account, url=url, event_filters=["*"])
                bucket.append(
                    {
                        "account": account,
                        "account_id": str(account.pk),
                        "port": port,
                        "url": url,
                        "secret": issued.secret,
                        "webhook_id": issued.webhook.pk,
                    }
                )
        total = args.endpoints * args.events
        print(
            f"{args.endpoints} endpoints answering 200 after {args.delay * 1000:.0f} ms, "
            f"{args.dead} that never answer; {args.events} events per account; "
            f"timeout {args.timeout:.0f} s"
        )
        service_describe("WEBHOOK_TIMEOUT_SECONDS", "WEBHOOK_SWEEP_INTERVAL_SECONDS")

        base = baseline(endpoints, args.events, healthy_log)
        print(
            f"  baseline: {total} deliveries in {base['seconds']:.2f} s "
            f"({base['rate']:.1f}/s), p95 start -> received {fmt_seconds(base['p95'])}"
            + (f", {len(base['errors'])} errors" if base["errors"] else "")
        )
        run = service_run(args, endpoints, dead, healthy_log, dead_log, workdir)
        rate = run["delivered"] / run["waited"] if run["waited"] else 0.0
        ratio = rate / base["rate"]
        latency_p95 = p95(run["latencies"], run["expected"])
        print(
            f"  service: {run['delivered']} of {run['expected']} healthy deliveries in "
            f"{run['waited']:.1f} s after the commit ({rate:.1f}/s)"
            + ("" if run["complete"] else " -- INCOMPLETE at the timeout")
        )
        if run["latencies"]:
            ordered = sorted(run["latencies"])
            print(
                f"  latency commit -> received: first {ordered[0]:.2f} s, "
                f"median {ordered[len(ordered) // 2]:.2f} s, p95 {fmt_seconds(latency_p95)}, "
                f"last {ordered[-1]:.2f} s"
            )
        print(f"  requests that reached the dead endpoints: {run['dead_attempts']}")
        print(
            f"  delivery jobs when measured: healthy {run['states']['healthy']}, "
            f"dead {run['states']['dead']}"
        )
        print(f"  worker/beat stopped on SIGTERM: {run['stopped_cleanly']}")
        print(
            f"\nmode: {MODE}; ratio service/baseline: {ratio:.3f} (goal >= {GOAL_RATIO}: "
            f"{'met' if ratio >= GOAL_RATIO else 'MISSED'}); p95 {fmt_seconds(latency_p95)} "
            f"(goal < {GOAL_P95:.0f} s: {'met' if latency_p95 < GOAL_P95 else 'MISSED'})"
        )
    finally:
        for receiver in receivers:
            process_stop(receiver)
        accounts_purge()  # webhooks, events, jobs, attempt rows go with the accounts
        broker_purge()


if __name__ == "__main__":
    main()
