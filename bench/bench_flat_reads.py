#!/usr/bin/env python
"""Reads that stay flat as an account grows: the campaign, contact, enrollment, delivery
and usage endpoints with one campaign of 0 / 10k / 100k / 1M enrollments, and the list
of campaigns under load against the list of API keys.

Served by the Procfile's web line (2 workers here), production settings,
PostgreSQL and Redis:

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/outreach_bench \\
    REDIS_URL=redis://127.0.0.1:6379/3 .venv/bin/python bench/bench_flat_reads.py

Seeding is SQL (INSERT ... SELECT generate_series), one statement per step, so a step's
rows share one created_at, as a batch written by one statement does. Another account
holds 100k enrollments throughout (the reads must not depend on other accounts' data).
After each step the tables are ANALYZEd, as autovacuum would soon do.

Goals: each endpoint's median at 1M within 1.5x of its median at 0; under load (8 client
threads, 2 web workers) GET /campaigns?limit=20 >= 0.7 of GET /api_keys?limit=1's
throughput, with p95 under 50 ms.
"""

import http.client
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

WORKERS = int(os.environ.get("BENCH_WORKERS", "2"))
CLIENTS = int(os.environ.get("BENCH_CLIENTS", "8"))
SAMPLES = int(os.environ.get("BENCH_SAMPLES", "40"))
LOAD_SECONDS = float(os.environ.get("BENCH_LOAD_SECONDS", "10"))
SIZES = [int(s) for s in os.environ.get("BENCH_SIZES", "0,10000,100000,1000000").split(",")]
OTHER_SIZE = int(os.environ.get("BENCH_OTHER_SIZE", "100000"))
KEYS = 2000  # 60 requests a minute per key: the load spreads over many keys of one account
CAMPAIGNS = int(os.environ.get("BENCH_CAMPAIGNS", "1"))
GOAL_ENDPOINTS = ("GET /campaigns?limit=20", "GET /campaigns/:id", "GET /campaigns/:id/stats")
DOMAIN = "flat.bench.invalid"


def _environment() -> dict:
    if not os.environ.get("DATABASE_URL") or not os.environ.get("REDIS_URL"):
        sys.exit("Set DATABASE_URL (PostgreSQL) and REDIS_URL: this benchmark measures production.")
    env = dict(os.environ)
    env.setdefault("SECRET_KEY", "bench-only-secret-key-000000000000000000000000000000")
    env.setdefault("FIELD_ENCRYPTION_KEY", "YmVuY2gtb25seS1maWVsZC1rZXktMDAwMDAwMDAwMDA=")
    env.setdefault("LOG_LEVEL", "WARNING")
    env.setdefault("RATE_LIMIT_KEY_PREFIX", f"rl-flat-{os.getpid()}")
    # The load spreads over many keys of one account: the account's own limit is lifted.
    env.setdefault("API_ACCOUNT_RATE_LIMIT", "1000000000")
    env["DJANGO_SETTINGS_MODULE"] = "config.settings"
    return env


class Seed:
    """The accounts, keys, campaigns and rows of the run (Django ORM for the small things,
    SQL for the volume)."""

    def __init__(self):
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", "--noinput", verbosity=0)
        self._drop()
        self.account, self.keys, self.campaign, self.webhook = self._account("main", keys=KEYS)
        self.other, _, self.other_campaign, self.other_webhook = self._account("other", keys=1)

    def _drop(self):
        from accounts.models import Account

        for account in Account.objects.filter(email__endswith=f"@{DOMAIN}"):
            self._raw_drop(account)

    def _raw_drop(self, account):
        from django.db import connection

        with connection.cursor() as cursor:
            for sql in (
                "DELETE FROM outreach_enrollment e USING outreach_campaign c"
                " WHERE e.campaign_id = c.id AND c.account_id = %s",
                "DELETE FROM outreach_contact WHERE account_id = %s",
                "DELETE FROM webhooks_webhookdelivery d USING webhooks_webhook w"
                " WHERE d.webhook_id = w.id AND w.account_id = %s",
            ):
                cursor.execute(sql, [account.pk])
        account.delete()

    def _account(self, label: str, *, keys: int):
        from accounts.models import Account, ApiKey
        from accounts.tokens import PREFIX_LENGTH, token_generate, token_hash
        from outreach.models.campaigns import Campaign, CampaignStep
        from outreach.models.mailboxes import SmtpCredential
        from plans.models import Plan
        from webhooks.models import Webhook
        from webhooks.secrets import secret_generate

        account = Account.objects.create(
            email=f"{label}@{DOMAIN}", plan=Plan.objects.get(slug="free")
        )
        plaintexts = [token_generate() for _ in range(keys)]
        ApiKey.objects.bulk_create(
            ApiKey(account=account, prefix=p[:PREFIX_LENGTH], key_hash=token_hash(p), label="b")
            for p in plaintexts
        )
        credential = SmtpCredential.objects.create(
            account=account,
            from_email=f"sender@{DOMAIN}",
            smtp_host="smtp.example.com",
            smtp_username="sender",
            smtp_password="secret",
        )
        campaigns = Campaign.objects.bulk_create(
            Campaign(account=account, name=f"campaign {n}") for n in range(CAMPAIGNS)
        )
        CampaignStep.objects.bulk_create(
            CampaignStep(
                campaign=c,
                position=p,
                subject="Hello {{first_name}}" if p == 1 else "",
                body_text="Hi {{first_name}}, a short note.",
                delay_minutes=0 if p == 1 else 2880,
            )
            for c in campaigns
            for p in (1, 2, 3)
        )
        for campaign in campaigns:
            campaign.credentials.add(credential)
        webhook = Webhook.objects.create(
            account=account,
            url="https://receiver.example/hook",
            event_filters=["*"],
            secret=secret_generate(),
        )
        # The biggest campaign is the oldest: the first page of campaigns holds it.
        return account, plaintexts, campaigns[0], webhook

    def grow(self, campaign, webhook, size: int, already: int) -> None:
        """Enrollments (with their contacts) and webhook deliveries up to `size`, in one
        statement each; then the campaign's kept stats recounted once (the seed bypasses
        the services that count), and ANALYZE."""
        from django.db import connection

        from outreach.enrollments import stats_check

        add = size - already
        if add <= 0:
            return
        with connection.cursor() as cursor:
            cursor.execute(
                """
                WITH contacts AS (
                    INSERT INTO outreach_contact (id, account_id, email, email_lower,
                        first_name, last_name, company, fields, timezone, created_at,
                        updated_at)
                    SELECT gen_random_uuid(), %(account)s, 'p' || g || '@' || %(domain)s,
                        'p' || g || '@' || %(domain)s, 'First', 'Last', 'Acme', '{}'::jsonb,
                        '', now(), now()
                    FROM generate_series(%(start)s::bigint, %(stop)s::bigint) AS g
                    RETURNING id
                )
                INSERT INTO outreach_enrollment (id, campaign_id, contact_id, status,
                    current_step, send_attempts, last_error, stop_reason, variants,
                    dispatched_at, sent_at, opened_at, replied_at, created_at, updated_at)
                SELECT gen_random_uuid(), %(campaign)s, id, 'sent', 1, 0, '', '', '{}'::jsonb,
                    now(), now(),
                    CASE WHEN random() < 0.4 THEN now() END,
                    CASE WHEN random() < 0.05 THEN now() END, now(), now()
                FROM contacts
                """,
                {
                    "account": campaign.account_id,
                    "campaign": campaign.pk,
                    "domain": f"{campaign.account_id}.{DOMAIN}",
                    "start": already,
                    "stop": size - 1,
                },
            )
            cursor.execute(
                """
                INSERT INTO webhooks_webhookdelivery (id, webhook_id, event_type, attempt,
                    status_code, response_excerpt, duration_ms, delivered_at, created_at)
                SELECT gen_random_uuid(), %s, 'enrollment.sent', 1, 200, '', 120, now(), now()
                FROM generate_series(1, %s::bigint)
                """,
                [webhook.pk, add],
            )
            stats_check(campaign_id=campaign.pk, repair=True)
            for table in ("outreach_contact", "outreach_enrollment", "webhooks_webhookdelivery"):
                cursor.execute(f"ANALYZE {table}")  # noqa: S608 - table names of this file

    def cleanup(self):
        self._drop()


def _get(port: int, path: str, key: str) -> tuple[int, float, bytes]:
    started = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", path, headers={"Authorization": f"Bearer {key}"})
    response = conn.getresponse()
    body = response.read()
    conn.close()
    return response.status, time.perf_counter() - started, body


class Keys:
    """Keys handed out round robin, so none passes its per-minute limit."""

    def __init__(self, keys):
        self.keys, self.n, self.lock = keys, 0, threading.Lock()

    def next(self) -> str:
        with self.lock:
            self.n += 1
            return self.keys[self.n % len(self.keys)]


def _median_ms(port, path, keys: Keys) -> float:
    times = []
    for _ in range(SAMPLES + 3):
        status, seconds, body = _get(port, path, keys.next())
        if status != 200:
            sys.exit(f"{path}: {status} {body[:300]!r}")
        times.append(seconds)
    return statistics.median(times[3:]) * 1000  # the first answers warm the workers


def _load(port, path, keys: Keys) -> tuple[float, float]:
    """CLIENTS threads for LOAD_SECONDS: (requests per second, p95 in ms)."""
    latencies: list[float] = []
    failures: list[int] = []
    deadline = time.perf_counter() + LOAD_SECONDS

    def run():
        mine = []
        while time.perf_counter() < deadline:
            status, seconds, _ = _get(port, path, keys.next())
            if status != 200:
                failures.append(status)
            mine.append(seconds)
        latencies.extend(mine)

    threads = [threading.Thread(target=run) for _ in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        sys.exit(f"{path}: non-200 answers under load: {sorted(set(failures))}")
    p95 = statistics.quantiles(latencies, n=20)[-1] * 1000
    return len(latencies) / LOAD_SECONDS, p95


def main() -> None:
    env = _environment()
    os.environ.update(env)
    seed = Seed()
    from tests.support.ports import free_port, wait_for_port

    port = free_port()
    from bench._peers import procfile

    server = subprocess.Popen(
        ["sh", "-c", procfile()["web"]],  # the Procfile's web line, as honcho runs it
        cwd=ROOT,
        env=env
        | {
            "BIND": f"127.0.0.1:{port}",
            "WEB_CONCURRENCY": str(WORKERS),
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        },
        stdout=subprocess.DEVNULL,  # the access log
    )
    keys = Keys(seed.keys)
    campaign, webhook = seed.campaign, seed.webhook
    paths = {
        "GET /campaigns?limit=20": "/campaigns?limit=20",
        "GET /campaigns/:id": f"/campaigns/{campaign.pk}",
        "GET /campaigns/:id/stats": f"/campaigns/{campaign.pk}/stats",
        "GET /campaigns/:id/enrollments?limit=20": f"/campaigns/{campaign.pk}/enrollments?limit=20",
        "GET /campaigns/:id/enrollments?status=sent&limit=20": (
            f"/campaigns/{campaign.pk}/enrollments?status=sent&limit=20"
        ),
        "GET /contacts?limit=20": "/contacts?limit=20",
        "GET /webhooks/:id/deliveries?limit=20": f"/webhooks/{webhook.pk}/deliveries?limit=20",
        "GET /billing/usage": "/billing/usage",
        "GET /api_keys?limit=1": "/api_keys?limit=1",
    }
    curve: dict[str, dict[int, float]] = {name: {} for name in paths}
    try:
        wait_for_port(port, timeout=90)
        seed.grow(seed.other_campaign, seed.other_webhook, OTHER_SIZE, 0)
        done = 0
        for size in SIZES:
            seed.grow(campaign, webhook, size, done)
            done = max(done, size)
            stats = json.loads(_get(port, f"/campaigns/{campaign.pk}", keys.next())[2])["stats"]
            assert stats["enrolled"] == size, stats
            line = []
            for name, path in paths.items():
                curve[name][size] = _median_ms(port, path, keys)
                line.append(f"{curve[name][size]:.1f}")
            print(f"{size:>9,} enrollments: " + " / ".join(line) + " ms", flush=True)
        campaigns_rate, campaigns_p95 = _load(port, paths["GET /campaigns?limit=20"], keys)
        keys_rate, keys_p95 = _load(port, paths["GET /api_keys?limit=1"], keys)
    finally:
        server.terminate()
        server.wait(timeout=15)
        seed.cleanup()

    print(f"\nMedian of {SAMPLES} requests, one client (ms):\n")
    print("| Endpoint | " + " | ".join(f"{s:,}" for s in SIZES) + " | largest / base |")
    print("|---|" + "---|" * (len(SIZES) + 1))
    worst = 0.0
    for name, points in curve.items():
        # The campaign endpoints against the empty campaign (the goal); a list against
        # its first full page (at 0 it is empty, which costs less than a page).
        base = SIZES[0] if name in GOAL_ENDPOINTS or len(SIZES) < 2 else SIZES[1]
        ratio = points[SIZES[-1]] / points[base]
        if name in GOAL_ENDPOINTS:
            worst = max(worst, ratio)
        cells = " | ".join(f"{points[s]:.1f}" for s in SIZES)
        print(f"| {name} | {cells} | {ratio:.2f} (/ {base:,}) |")
    print(
        f"\ncampaign endpoints, worst growth from the empty campaign: {worst:.2f}x "
        f"(goal <= 1.5x: {'met' if worst <= 1.5 else 'MISSED'})"
    )
    ratio = campaigns_rate / keys_rate
    print(
        f"\nUnder load ({CLIENTS} client threads, {WORKERS} web workers, {LOAD_SECONDS:.0f} s each,"
        f" campaign of {SIZES[-1]:,}):\n"
        f"GET /campaigns?limit=20 {campaigns_rate:.0f} req/s (p95 {campaigns_p95:.1f} ms)\n"
        f"GET /api_keys?limit=1   {keys_rate:.0f} req/s (p95 {keys_p95:.1f} ms)\n"
        f"ratio {ratio:.2f} (goal >= 0.7: {'met' if ratio >= 0.7 else 'MISSED'});"
        f" p95 goal < 50 ms: {'met' if campaigns_p95 < 50 else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
