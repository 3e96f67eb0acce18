#!/usr/bin/env python
"""Throughput of an authenticated GET /api_keys against a bare DRF view.

Both are served by the Procfile's web line (same workers, same settings), in the same run,
in alternating rounds, so the ratio is what the authenticated path costs:
bearer lookup + last_used_at + request count (one statement on PostgreSQL), the
per-key rate limit (one Redis script call), the scoped list query, serializing.

The load spreads over many accounts, one key each, so no key passes its
60-requests-a-minute limit: every measured answer must be a 200.

Needs PostgreSQL and Redis:

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/outreach_bench \\
    REDIS_URL=redis://127.0.0.1:6379/3 .venv/bin/python bench/bench_auth.py

Goal: authenticated throughput >= 60% of the bare view's.
"""

import http.client
import multiprocessing
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

WORKERS = int(os.environ.get("BENCH_WORKERS", "2"))
CLIENT_PROCESSES = int(os.environ.get("BENCH_CLIENT_PROCESSES", "2"))
THREADS_PER_PROCESS = int(os.environ.get("BENCH_THREADS", "4"))
ROUND_SECONDS = float(os.environ.get("BENCH_ROUND_SECONDS", "5"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
ACCOUNTS = int(os.environ.get("BENCH_ACCOUNTS", "2000"))
BENCH_DOMAIN = "bench.invalid"
GOAL = 0.60
# What each step adds: authentication alone, then the rate limit, then the list.
TARGETS = {
    "bare": "/bench/bare",
    "durable_update": "/bench/durable-update",
    "auth": "/bench/auth",
    "auth_throttle": "/bench/auth-throttle",
    "api_keys": "/api_keys",
}


def _environment() -> dict:
    if not os.environ.get("DATABASE_URL") or not os.environ.get("REDIS_URL"):
        sys.exit(
            "Set DATABASE_URL (PostgreSQL) and REDIS_URL: this benchmark measures production mode."
        )
    env = dict(os.environ)
    env["DJANGO_SETTINGS_MODULE"] = "bench.auth_settings"
    env.setdefault("SECRET_KEY", "bench-only-secret-key-000000000000000000000000000000")
    env.setdefault("FIELD_ENCRYPTION_KEY", "YmVuY2gtb25seS1maWVsZC1rZXktMDAwMDAwMDAwMDA=")
    env.setdefault("LOG_LEVEL", "WARNING")
    env.setdefault("RATE_LIMIT_KEY_PREFIX", f"rl-bench-{os.getpid()}")
    return env


def _prepare() -> tuple[list[str], int]:
    """Migrate, create ACCOUNTS accounts with one key each; return the plaintexts
    and the queries one authenticated GET /api_keys makes."""
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from accounts.models import Account, ApiKey
    from accounts.tokens import PREFIX_LENGTH, token_generate, token_hash
    from plans.models import Plan

    call_command("migrate", "--noinput", verbosity=0)
    Account.objects.filter(email__endswith=f"@{BENCH_DOMAIN}").delete()
    free = Plan.objects.get(slug="free")
    accounts = Account.objects.bulk_create(
        Account(email=f"bench{n}@{BENCH_DOMAIN}", plan=free) for n in range(ACCOUNTS)
    )
    plaintexts = [token_generate() for _ in accounts]
    ApiKey.objects.bulk_create(
        ApiKey(
            account=account,
            prefix=plaintext[:PREFIX_LENGTH],
            key_hash=token_hash(plaintext),
            label="bench",
        )
        for account, plaintext in zip(accounts, plaintexts, strict=True)
    )
    client = Client(HTTP_AUTHORIZATION=f"Bearer {plaintexts[-1]}")
    client.get("/api_keys")  # Warm up (connection, Redis script load).
    with CaptureQueriesContext(connection) as queries:
        assert client.get("/api_keys").status_code == 200
    connection.close()
    return plaintexts[:-1], len(queries)


def _client_process(port, path, keys, seconds, start_at, results, once=False):
    """Threads sending GETs as fast as answers come back, one connection per request
    (a new connection each time, as most API clients make). `once`: each key once."""
    statuses: Counter = Counter()
    lock = threading.Lock()

    def run(thread_keys):
        local: Counter = Counter()
        n = 0
        while time.time() < start_at:
            time.sleep(0.001)
        deadline = start_at + seconds
        while time.time() < deadline if not once else n < len(thread_keys):
            headers = {}
            if thread_keys:
                headers["Authorization"] = f"Bearer {thread_keys[n % len(thread_keys)]}"
            n += 1
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            conn.request("GET", path, headers=headers)
            response = conn.getresponse()
            response.read()
            conn.close()
            local[response.status] += 1
        with lock:
            statuses.update(local)

    threads = [
        threading.Thread(target=run, args=(keys[i::THREADS_PER_PROCESS],))
        for i in range(THREADS_PER_PROCESS)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    results.put(dict(statuses))


def _measure(port, path, key_slices, once=False) -> tuple[float, Counter]:
    results: multiprocessing.Queue = multiprocessing.Queue()
    start_at = time.time() + 0.5
    processes = [
        multiprocessing.Process(
            target=_client_process,
            args=(port, path, key_slices[i], ROUND_SECONDS, start_at, results, once),
        )
        for i in range(CLIENT_PROCESSES)
    ]
    for process in processes:
        process.start()
    total: Counter = Counter()
    for _ in processes:
        total.update(results.get())
    for process in processes:
        process.join()
    return sum(total.values()) / ROUND_SECONDS, total


def main() -> None:
    env = _environment()
    os.environ.update(env)
    keys, queries = _prepare()
    sys.path.insert(0, str(ROOT))
    from tests.support.ports import free_port, wait_for_port

    port = free_port()
    from bench._peers import procfile

    # The Procfile's web line, through a shell as honcho runs it.
    server = subprocess.Popen(
        ["sh", "-c", procfile()["web"]],
        cwd=ROOT,
        env=env
        | {
            "BIND": f"127.0.0.1:{port}",
            "WEB_CONCURRENCY": str(WORKERS),
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        },
    )
    try:
        wait_for_port(port, timeout=90)
        empty = [[] for _ in range(CLIENT_PROCESSES)]
        slices = [keys[i::CLIENT_PROCESSES] for i in range(CLIENT_PROCESSES)]
        # Warm-up, not counted: every worker up and connected, and every key used
        # once (the account's hourly request-count row exists, as it does for any
        # account active this hour).
        _measure(port, "/bench/bare", empty)
        _measure(port, "/api_keys", slices, once=True)
        rates: dict[str, list[float]] = {name: [] for name in TARGETS}
        for round_ in range(ROUNDS):
            line = []
            for name, path in TARGETS.items():
                # Keys used in this round's rounds stay far below 60 a minute each.
                rate, statuses = _measure(port, path, empty if name == "bare" else slices)
                if set(statuses) != {200}:
                    sys.exit(f"non-200 answers from {path}: {statuses}")
                rates[name].append(rate)
                line.append(f"{name} {rate:6.0f}")
            print(f"round {round_ + 1}: " + "   ".join(line) + " req/s")
    finally:
        server.terminate()
        server.wait(timeout=15)
    mean = {name: sum(values) / ROUNDS for name, values in rates.items()}
    bare, auth = mean["bare"], mean["api_keys"]
    ratio = auth / bare
    print()
    for name, path in TARGETS.items():
        print(f"{path:22s} {mean[name]:7.0f} req/s  {mean[name] / bare:6.1%} of bare")
    print(
        f"\nratio GET /api_keys / bare: {ratio:.1%}  (goal >= {GOAL:.0%}: {'met' if ratio >= GOAL else 'MISSED'})\n"
        f"SQL queries per authenticated request: {queries} (+1 Redis EVALSHA)\n"
        f"the Procfile's web line, WEB_CONCURRENCY={WORKERS}; {CLIENT_PROCESSES}x{THREADS_PER_PROCESS} client threads "
        f"on the same machine; {ROUNDS} rounds of {ROUND_SECONDS:.0f}s each"
    )


if __name__ == "__main__":
    main()
