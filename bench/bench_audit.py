#!/usr/bin/env python
"""The cost of the audit log on two write endpoints: `PATCH /campaigns/:id` and
`POST /campaigns/:id/dispatch`, against the same endpoints of the code before it.

Two codebases, each in its own process on its own database: this tree (HEAD) and a
worktree of the code before (BASE_TREE, e.g. `git worktree add --detach /tmp/audit-base
<commit>`). Each process runs the requests in process (Django's test client: the whole
middleware, DRF and service path, no HTTP server between), authenticated with a real
key; the rate limits are lifted in both alike. Rounds alternate between the two
processes, so both see the same minutes of the machine. Per round: REQUESTS PATCHes
(each a new name), then REQUESTS dispatches, each of ENROLL fresh pending enrollments
(enrolled before its request, outside the timing). Each request is timed alone; a
round's figure is the median. The machine's speed drifts by 10-30% over seconds (a shared
host), so rounds are short and many, and the figure is the median of the rounds' paired
ratios (HEAD's round / BASE's round next to it); the ratio of the two sides' medians is
printed beside it.

    BASE_TREE=/tmp/audit-base DATABASE_URL=postgres://postgres@127.0.0.1:5432/outreach_bench_audit \\
    REDIS_URL=redis://127.0.0.1:6379/3 /work/main/.venv/bin/python bench/bench_audit.py

(the base runs on `<database>_base`). Goal: ratio <= 1.10 on both endpoints.
"""

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "80"))
REQUESTS = int(os.environ.get("BENCH_REQUESTS", "5"))
ENROLL = int(os.environ.get("BENCH_ENROLL", "10"))
GOAL = 1.10


# ------------------------------------------------------------------- in each codebase


def _runner() -> None:
    """One codebase's side: set up, then answer each `round` line with its timings."""
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", "--noinput", verbosity=0)
    from django.conf import settings
    from django.test import Client

    from accounts import ratelimit, throttling
    from accounts.services import api_key_create
    from tests.accounts.factories import AccountFactory
    from tests.outreach.factories import CampaignFactory, EnrollmentFactory

    for module in (ratelimit, throttling):
        if hasattr(module, "API_KEY_LIMIT"):
            module.API_KEY_LIMIT = 10**9
    settings.API_ACCOUNT_RATE_LIMIT = 10**9
    account = AccountFactory()
    key = api_key_create(account=account, label="bench").plaintext
    client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    campaign = CampaignFactory(account=account)
    counter = 0

    def timed(call) -> float:
        started = time.perf_counter()
        response = call()
        elapsed = time.perf_counter() - started
        assert response.status_code == 200, response.content
        return elapsed

    print("ready", flush=True)
    for line in sys.stdin:
        if line.strip() != "round":
            break
        patches, dispatches = [], []
        for _ in range(REQUESTS):
            counter += 1
            body = json.dumps({"name": f"Bench {counter}"})
            patches.append(
                timed(
                    lambda body=body: client.patch(
                        f"/campaigns/{campaign.pk}", body, content_type="application/json"
                    )
                )
            )
        for _ in range(REQUESTS):
            for _ in range(ENROLL):
                EnrollmentFactory(campaign=campaign)
            dispatches.append(
                timed(
                    lambda: client.post(
                        f"/campaigns/{campaign.pk}/dispatch",
                        '{"all_pending": true}',
                        content_type="application/json",
                    )
                )
            )
        print(
            json.dumps(
                {"patch": statistics.median(patches), "dispatch": statistics.median(dispatches)}
            ),
            flush=True,
        )


# ------------------------------------------------------------------- the driver


def _database(url: str) -> None:
    import psycopg

    base, name = url.rsplit("/", 1)
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def _start(tree: Path, database_url: str) -> subprocess.Popen:
    _database(database_url)
    env = dict(os.environ)
    env.update(
        {
            "DATABASE_URL": database_url,
            "PYTHONPATH": str(tree),
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "SECRET_KEY": "bench-only-secret-key-000000000000000000000000000000",
            "FIELD_ENCRYPTION_KEY": "YmVuY2gtb25seS1maWVsZC1rZXktMDAwMDAwMDAwMDA=",
            "LOG_LEVEL": "WARNING",
            "SENDING_SCHEDULE_ON_DISPATCH": "false",
            "SIGNUP_EMAIL_VERIFICATION": "false",
            "ALLOWED_HOSTS": "testserver",
        }
    )
    process = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--runner"],
        cwd=tree,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stdout.readline().strip() == "ready"
    return process


def _round(process: subprocess.Popen) -> dict:
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write("round\n")
    process.stdin.flush()
    return json.loads(process.stdout.readline())


def main() -> None:
    base_tree = Path(os.environ.get("BASE_TREE", ""))
    url = os.environ.get("DATABASE_URL", "")
    if not (base_tree / "manage.py").exists() or not url:
        sys.exit("Set BASE_TREE (a worktree of the code before) and DATABASE_URL.")
    sides = {"head": _start(ROOT, url), "base": _start(base_tree, f"{url}_base")}
    figures: dict[str, list[dict]] = {"head": [], "base": []}
    try:
        for number in range(ROUNDS):
            order = ["head", "base"] if number % 2 == 0 else ["base", "head"]
            for side in order:
                figures[side].append(_round(sides[side]))
    finally:
        for process in sides.values():
            process.communicate("stop\n", timeout=60)
    print(f"{ROUNDS} rounds x {REQUESTS} requests; dispatch of {ENROLL} pending each")
    ok = True
    for endpoint in ("patch", "dispatch"):
        head = statistics.median(r[endpoint] for r in figures["head"])
        base = statistics.median(r[endpoint] for r in figures["base"])
        paired = statistics.median(
            h[endpoint] / b[endpoint] for h, b in zip(figures["head"], figures["base"], strict=True)
        )
        ok = ok and paired <= GOAL
        print(
            f"{endpoint:9} head {head * 1000:6.2f} ms  base {base * 1000:6.2f} ms  "
            f"ratio of medians {head / base:.3f}  median of paired ratios {paired:.3f} "
            f"(goal <= {GOAL})"
        )
    print("goal met" if ok else "goal missed")


if __name__ == "__main__":
    if "--runner" in sys.argv:
        sys.path.insert(0, os.getcwd())
        _runner()
    else:
        main()
