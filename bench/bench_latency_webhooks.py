"""Webhook delivery to slow and dead receivers: the service as deployed (the Procfile's
worker and beat) against plain HTTP clients at the same concurrency, in the same run.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/outreach_latbench \\
    REDIS_URL=redis://127.0.0.1:6379/6 \\
      .venv/bin/python bench/bench_latency_webhooks.py --timeout 300
    .venv/bin/python bench/bench_latency_webhooks.py --timeout 300   # the embedded mode
    ... bench/bench_latency_webhooks.py --timeout 300 --through-api
      (from outside: the Procfile's web too; the events caused by recipients' mail
      clients loading the open pixel)

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

Through the API (`--through-api`): the whole Procfile runs (its `web:` line too, on a
free port: bench/_peers.py's Service(web=True)), and the events are what recipients
cause: each account has one active campaign whose step 1 was sent an hour ago to 10
contacts (enrollments `sent` and their Message rows, written in setup), and each
contact's mail client loads the open pixel of its email (`GET /t/o/<token>.gif`, the
URL taken from the HTML message_build renders for it; no API key, a new connection per
request). The first load of a pixel records the open and emits `enrollment.opened`
(docs/intake.md; a repeat load emits nothing), so every account gets exactly its 10
events. The 520 loads go through a pool of --openers threads (many recipients opening
at once), in the in-process mode's order (open 1 of every account, then open 2, ...);
once the web is warmed (web_warm), the clock starts at the first request. Per event:
the start of its pixel request -> received by the endpoint (the envelope id, a delivery
job's, mapped to its enrollment through the job's event); p95 over the healthy
endpoints' 500; deliveries per second from the first request until every healthy
endpoint has received all 10 and was answered. Same baseline, same run.

Goals: the service's deliveries per second >= 50% of the baseline's (from outside, issue
32: >= 80%); p95 < 2 s.
It migrates the database, empties the broker's queues and deletes the accounts it
made (bench-latency-webhooks-...@example.com) before and after.
"""

import argparse
import email
import email.policy
import json
import math
import os
import re
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from html import unescape
from pathlib import Path
from urllib.parse import urlsplit

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
    web_bind,
    web_get,
    web_warm,
)

LABEL = "latency-webhooks"
# production or embedded: its environment set before Django is (_setup).
MODE = mode_environment(LABEL)

from _setup import (  # noqa: E402
    account_create,
    api_keys_create,
    contacts_create,
    mailboxes_create,
    messages_render,
    prepare,
    sent_create,
    step_create,
)

GOAL_RATIO = 0.5
GOAL_RATIO_API = 0.8  # from outside (issue 32)
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


def interleaved(endpoints: list[dict], dead: list[dict]) -> list[dict]:
    """Every account in the order its events are caused: the dead endpoints' accounts
    spread evenly among the healthy ones."""
    everyone = list(endpoints)
    for k, endpoint in enumerate(dead):
        everyone.insert(round(k * len(endpoints) / len(dead)) + k, endpoint)
    return everyone


def emit_in_process(everyone: list[dict], events: int) -> float:
    """The events emitted with event_emit in one transaction, account after account for
    event 1, then event 2, ...; returns the time of the commit."""
    from django.db import transaction

    from webhooks.events import event_emit

    committed: list[float] = []
    with transaction.atomic():
        transaction.on_commit(lambda: committed.append(time.time()))  # runs first
        for n in range(events):
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
    return committed[0]


# The open pixel in the HTML message_build renders (outreach/sending/message.py).
PIXEL_URL = re.compile(r'background="([^"]*/t/o/[^"]+\.gif)"')


def opens_prepare(account, count: int) -> list[tuple[str, str]]:
    """An active campaign of `account` whose step 1 went out an hour ago to `count`
    contacts (sent_create), and what each contact's mail client will load: (enrollment
    id, the path of the open pixel in the email message_build renders for it)."""
    from datetime import timedelta

    from django.utils import timezone

    from outreach.models.campaigns import Campaign

    campaign = Campaign.objects.create(account=account, name="bench opens", status="active")
    # Nothing is sent in the run (no enrollment is due): the mailbox is never connected to.
    (credential,) = mailboxes_create(account, 1, port=25)
    campaign.credentials.add(credential)
    step_create(campaign)
    contacts = contacts_create(account, count)
    sent_at = timezone.now() - timedelta(hours=1)
    enrollments, _ = sent_create(campaign, contacts, credential=credential, at=sent_at)
    loads = []
    for enrollment, outgoing in zip(
        enrollments, messages_render(enrollments, credential=credential, now=sent_at), strict=True
    ):
        message = email.message_from_bytes(outgoing.data, policy=email.policy.default)
        html = message.get_body(("html",)).get_content()
        url = unescape(PIXEL_URL.search(html).group(1))
        loads.append((str(enrollment.pk), urlsplit(url).path))
    return loads


class Opens:
    """Recipients' mail clients loading the open pixels (`loads`: enrollment id, path),
    in the order given, through a pool of `openers` threads, each load a GET on a new
    connection to the web (web_get). Started on construction."""

    def __init__(self, loads: list[tuple[str, str]], openers: int):
        self.started: dict[str, float] = {}  # enrollment id -> its request's start
        self.seconds: list[float] = []  # each load's, start to answer
        self.failures: list[str] = []
        self.pool = ThreadPoolExecutor(openers)
        for enrollment_id, path in loads:
            self.pool.submit(self._load, enrollment_id, path)

    def _load(self, enrollment_id: str, path: str) -> None:
        started = self.started[enrollment_id] = time.time()
        try:
            status, body = web_get(path)
        except OSError as exc:
            self.failures.append(f"{path}: {exc!r}")
            return
        self.seconds.append(time.time() - started)
        if status != 200 or not body.startswith(b"GIF89a"):
            self.failures.append(f"{path}: {status} {body[:80]!r}")

    def first(self) -> float:
        return min(self.started.values())

    def wait(self) -> None:
        self.pool.shutdown(wait=True)


def service_run(args, endpoints, dead, healthy_log: LineLog, dead_log: LineLog, workdir, key=""):
    from django.db.models import Count

    from webhooks.models import DeliveryJob

    everyone = interleaved(endpoints, dead)
    healthy_webhooks = [e["webhook_id"] for e in endpoints]
    broker_purge()
    workdir.mkdir(parents=True, exist_ok=True)
    result: dict = {}
    opens = None
    with Service(workdir, service_env(), web=args.through_api) as service:
        service.start()
        if args.through_api:
            warm = web_warm("/campaigns", key=key)
            print(f"  web warmed: slowest GET of each round {ms(warm)}")
        healthy_log.skip()
        dead_log.skip()
        if args.through_api:
            # Every envelope id on the healthy endpoints' log is then this run's.
            expected = None
            wanted = len(endpoints) * args.events
            opens = Opens(
                [endpoint["opens"][n] for n in range(args.events) for endpoint in everyone],
                args.openers,
            )
            deadline = time.time() + args.timeout
        else:
            commit = emit_in_process(everyone, args.events)
            expected = {
                str(job_id)
                for job_id in DeliveryJob.objects.filter(
                    webhook_id__in=healthy_webhooks
                ).values_list("id", flat=True)
            }
            wanted = len(expected)
            deadline = commit + args.timeout
        first: dict[str, tuple[float, float | None]] = {}
        dead_attempts = 0
        while True:
            for received, answered, event_id in parse_log(healthy_log.read()):
                ours = event_id in expected if expected is not None else event_id != "-"
                if ours and event_id not in first:
                    first[event_id] = (received, answered)
            dead_attempts += len(dead_log.read())
            if len(first) >= wanted and all(a for _, a in first.values()):
                end = max(a for _, a in first.values())
                break
            if time.time() >= deadline or not service.alive():
                end = time.time()
                if not service.alive():
                    print("  a service process exited early; see its log")
                break
            time.sleep(0.05)
        if opens is not None:
            opens.wait()
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
    if opens is None:
        latencies = [received - commit for received, _ in first.values()]
        waited = end - commit
    else:
        # The envelope id is the delivery job's; its event names the enrollment opened.
        opened = dict(
            DeliveryJob.objects.filter(
                id__in=list(first), webhook_id__in=healthy_webhooks
            ).values_list("id", "event__data__enrollment_id")
        )
        if len(opened) != len(first):
            print(f"  {len(first) - len(opened)} envelope ids are no healthy delivery job's")
        latencies = [first[str(job)][0] - opens.started[owner] for job, owner in opened.items()]
        waited = end - opens.first()
        result["opens"] = opens
    result.update(
        stopped_cleanly=service.stopped_cleanly,
        expected=wanted,
        delivered=len(latencies),
        waited=waited,
        complete=len(latencies) == wanted,
        latencies=latencies,
        dead_attempts=dead_attempts,
    )
    print(f"  logs: {workdir}")
    return result


def ms(seconds: list[float]) -> str:
    return ", ".join(f"{s * 1000:.0f} ms" for s in seconds)


def opens_report(opens: Opens, total: int) -> None:
    """The pixel loads as their clients saw them."""
    ordered = sorted(opens.seconds)
    print(
        f"  pixel loads: {len(ordered)} of {total} answered"
        + (f", {len(opens.failures)} failed, first: {opens.failures[0]}" if opens.failures else "")
    )
    if ordered:
        print(
            f"  pixel load times: median {ms([ordered[len(ordered) // 2]])}, "
            f"p95 {ms([p95(ordered, len(ordered))])}, max {ms([ordered[-1]])}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--endpoints", type=int, default=50, help="healthy endpoints")
    parser.add_argument("--dead", type=int, default=2, help="endpoints that never answer")
    parser.add_argument("--events", type=int, default=10, help="per account")
    parser.add_argument("--delay", type=float, default=0.2, help="healthy answer delay (s)")
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument(
        "--through-api",
        action="store_true",
        help="the Procfile's web too; the events caused by loads of the open pixel",
    )
    parser.add_argument(
        "--openers", type=int, default=50, help="pixel loads at once (with --through-api)"
    )
    args = parser.parse_args()
    sigterm_exits()
    prepare()
    accounts_purge()
    if args.through_api:
        web_bind()
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
                if args.through_api:
                    bucket[-1]["opens"] = opens_prepare(account, args.events)
        total = args.endpoints * args.events
        print(
            f"{args.endpoints} endpoints answering 200 after {args.delay * 1000:.0f} ms, "
            f"{args.dead} that never answer; {args.events} events per account; "
            f"timeout {args.timeout:.0f} s; "
            + (
                f"events through the API: open pixel loads, {args.openers} at once"
                if args.through_api
                else "events emitted in process"
            )
            + f"; load {os.getloadavg()[0]:.2f} (1 min)"
        )
        service_describe(
            "WEBHOOK_TIMEOUT_SECONDS", "WEBHOOK_SWEEP_INTERVAL_SECONDS", web=args.through_api
        )

        base = baseline(endpoints, args.events, healthy_log)
        print(
            f"  baseline: {total} deliveries in {base['seconds']:.2f} s "
            f"({base['rate']:.1f}/s), p95 start -> received {fmt_seconds(base['p95'])}"
            + (f", {len(base['errors'])} errors" if base["errors"] else "")
        )
        # An API key for warming the web (its account's address verified).
        key = api_keys_create(endpoints[0]["account"])[0] if args.through_api else ""
        run = service_run(args, endpoints, dead, healthy_log, dead_log, workdir, key=key)
        rate = run["delivered"] / run["waited"] if run["waited"] else 0.0
        ratio = rate / base["rate"]
        goal_ratio = GOAL_RATIO_API if args.through_api else GOAL_RATIO
        latency_p95 = p95(run["latencies"], run["expected"])
        start = "the first pixel request" if args.through_api else "the commit"
        if args.through_api:
            opens_report(run["opens"], (args.endpoints + args.dead) * args.events)
        print(
            f"  service: {run['delivered']} of {run['expected']} healthy deliveries in "
            f"{run['waited']:.1f} s after {start} ({rate:.1f}/s)"
            + ("" if run["complete"] else " -- INCOMPLETE at the timeout")
        )
        if run["latencies"]:
            ordered = sorted(run["latencies"])
            print(
                f"  latency {'pixel request' if args.through_api else 'commit'} -> received: "
                f"first {ordered[0]:.2f} s, "
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
            f"\nmode: {MODE}"
            + ("; events through the API (open pixel)" if args.through_api else "")
            + f"; ratio service/baseline: {ratio:.3f} (goal >= {goal_ratio}: "
            f"{'met' if ratio >= goal_ratio else 'MISSED'}); p95 {fmt_seconds(latency_p95)} "
            f"(goal < {GOAL_P95:.0f} s: {'met' if latency_p95 < GOAL_P95 else 'MISSED'})"
        )
    finally:
        for receiver in receivers:
            process_stop(receiver)
        accounts_purge()  # webhooks, events, jobs, attempt rows go with the accounts
        broker_purge()


if __name__ == "__main__":
    main()
