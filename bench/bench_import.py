"""Contact import throughput: the service (POST /contact_imports' worker path) against
reading the same CSV with the csv module and inserting the rows with psycopg (INSERT ...
ON CONFLICT, 1,000 rows per statement), same run.

    DATABASE_URL=postgres://... REDIS_URL=... .venv/bin/python bench/bench_import.py [rows]
      (in process: contact_import_run, what the worker's task runs, called here)
    DATABASE_URL=postgres://... REDIS_URL=... .venv/bin/python bench/bench_import.py [rows] \\
      --through-api
      (from outside: the whole Procfile started as bench/_peers.py's Service(web=True)
      does; the CSV uploaded as `POST /contact_imports` (multipart `file`) with an API
      key against its web server, then `GET /contact_imports/:id` polled every
      --poll seconds; the clock runs from the upload request until the answer that says
      `completed`. The polls rotate over --keys API keys of the account, each key's rate
      limit being 60 requests a minute.)

Goal: the service reaches at least 50% of the baseline's rows per second (in process
and through the API).

The recipient domain check (RECIPIENT_DOMAIN_CHECK, on by default in production) is off
here, in this process and the service's: the baseline asks no DNS, the check's own cost
is bench/bench_import_dns.py's (against a local DNS server), and with it on this
benchmark's domains (example0.org ...) are looked up in the machine's DNS: the figure
would depend on it (and the rows it skips fail the run's count). Set
RECIPIENT_DOMAIN_CHECK=true to measure with it anyway.
"""

import argparse
import csv
import io
import os
import re
import tempfile
import time
import uuid
from pathlib import Path

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("rows", nargs="?", type=int, default=100_000)
parser.add_argument(
    "--through-api",
    action="store_true",
    help="upload through POST /contact_imports on the Procfile's web, poll its GET",
)
parser.add_argument("--poll", type=float, default=0.25, help="seconds between polls")
parser.add_argument("--keys", type=int, default=5, help="API keys the polls rotate over")
parser.add_argument("--timeout", type=float, default=600, help="seconds to wait for the end")
ARGS = parser.parse_args()
ROWS = ARGS.rows
GOAL = 0.5
os.environ.setdefault("RECIPIENT_DOMAIN_CHECK", "false")

if ARGS.through_api:
    from _peers import (
        Service,
        api_call,
        broker_purge,
        mode_environment,
        multipart_body,
        service_describe,
        service_env,
        sigterm_exits,
        web_bind,
        web_warm,
    )

    MODE = mode_environment("import")

from _setup import account_create, account_drop, api_keys_create, prepare  # noqa: E402

prepare()

import psycopg  # noqa: E402
from django.db import connection  # noqa: E402
from django.utils import timezone  # noqa: E402
from psycopg.types.json import Jsonb  # noqa: E402

from outreach.contacts import imports  # noqa: E402
from outreach.models.contacts import Contact, ContactImport  # noqa: E402


def make_csv(rows: int) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["email", "first_name", "last_name", "company", "job_title"])
    for i in range(rows):
        writer.writerow(
            [f"person{i}@example{i % 97}.org", f"First{i}", f"Last{i}", f"Co {i % 500}", "Engineer"]
        )
    return out.getvalue().encode()


def baseline(data: bytes, account) -> float:
    """The csv module and psycopg: INSERT ... ON CONFLICT (account, email_lower) DO UPDATE
    of 1,000 rows per statement, the same rows and unique rule as the service, nothing
    else (no validation, no progress, no suppression list)."""
    columns = (
        "id, account_id, email, email_lower, first_name, last_name, company, fields, "
        "timezone, created_at, updated_at"
    )
    row_sql = "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"

    def flush(cursor, batch):
        cursor.execute(
            f"INSERT INTO outreach_contact ({columns}) VALUES "  # noqa: S608
            + ", ".join([row_sql] * len(batch))
            + " ON CONFLICT (account_id, email_lower) DO UPDATE SET"
            " first_name = excluded.first_name, last_name = excluded.last_name,"
            " company = excluded.company, fields = excluded.fields,"
            " updated_at = excluded.updated_at",
            [value for row in batch for value in row],
        )

    started = time.perf_counter()
    reader = csv.DictReader(io.StringIO(data.decode()))
    settings = connection.settings_dict
    raw = psycopg.connect(
        host=settings["HOST"],
        port=settings["PORT"] or 5432,
        user=settings["USER"],
        password=settings["PASSWORD"],
        dbname=settings["NAME"],
    )
    batch = []
    with raw, raw.cursor() as cursor:
        for row in reader:
            email = row["email"]
            now = timezone.now()
            batch.append(
                (
                    uuid.uuid4(),
                    account.pk,
                    email,
                    email.lower(),
                    row["first_name"],
                    row["last_name"],
                    row["company"],
                    Jsonb({"job_title": row["job_title"]}),
                    "",
                    now,
                    now,
                )
            )
            if len(batch) == 1000:
                flush(cursor, batch)
                raw.commit()
                batch = []
        if batch:
            flush(cursor, batch)
            raw.commit()
    return time.perf_counter() - started


def service(data: bytes, account) -> tuple[float, ContactImport]:
    contact_import = ContactImport.objects.create(
        account=account, source_format="csv", source_data=data, filename="bench.csv"
    )
    started = time.perf_counter()
    result = imports.contact_import_run(import_id=contact_import.pk)
    return time.perf_counter() - started, result


def service_through_api(data: bytes, account) -> tuple[float, ContactImport]:
    """The whole Procfile (web, worker, webhooks, beat); the upload, then the polls until
    the import is `completed` (or `failed`, or the timeout). The service is stopped
    before this returns."""
    keys = api_keys_create(account, ARGS.keys)
    body, content_type = multipart_body("file", "bench.csv", data)
    workdir = Path(tempfile.mkdtemp(prefix="bench-import-"))
    broker_purge()
    connection.close()  # the bench database's connections are the service's alone
    polls = throttled = 0
    with Service(workdir, service_env(), web=True) as service:
        service.start()
        warm = web_warm("/contact_imports", key=keys[-1])
        print(f"  web warmed: slowest GET of each round {', '.join(f'{s:.3f} s' for s in warm)}")
        started = time.perf_counter()
        status, answer = api_call(
            "POST", "/contact_imports", key=keys[0], body=body, content_type=content_type
        )
        upload = time.perf_counter() - started
        assert status == 201, (status, answer)
        import_id, upload_status = answer["id"], answer["status"]
        deadline = started + ARGS.timeout
        while time.perf_counter() < deadline:
            time.sleep(ARGS.poll)
            polls += 1
            status, answer = api_call(
                "GET", f"/contact_imports/{import_id}", key=keys[polls % len(keys)]
            )
            if status == 429:
                throttled += 1
                continue
            assert status == 200, (status, answer)
            if answer["status"] in ("completed", "failed"):
                break
        seconds = time.perf_counter() - started
        worker_log = service.log("worker")
    print(f"  upload request: {upload * 1000:.0f} ms (201, status {upload_status})")
    print(f"  polls: {polls} ({throttled} answered 429); service logs: {workdir}")
    print(f"  API answer: status {answer['status']}, processed_rows {answer['processed_rows']}")
    runtimes = re.findall(r"import_contacts\[[^\]]+\] succeeded in ([0-9.]+)s", worker_log)
    if runtimes:
        print(f"  worker log: import_contacts succeeded in {float(runtimes[-1]):.2f} s")
    return seconds, ContactImport.objects.get(pk=import_id)


def main():
    data = make_csv(ROWS)
    if ARGS.through_api:
        sigterm_exits()
        web_bind()
        print(f"through the API (mode {MODE}):")
        service_describe("BIND", web=True)
    base_account = account_create("import-baseline")
    service_account = account_create("import-service", plan="scale" if ARGS.through_api else "free")
    try:
        base_seconds = baseline(data, base_account)
        if ARGS.through_api:
            service_seconds, result = service_through_api(data, service_account)
        else:
            service_seconds, result = service(data, service_account)
        assert result.status == "completed", (result.status, result.failure_reason)
        assert result.created_count == ROWS, result.created_count
        assert Contact.objects.filter(account=service_account).count() == ROWS
    finally:
        account_drop(base_account)
        account_drop(service_account)
    base_rate = ROWS / base_seconds
    service_rate = ROWS / service_seconds
    where = (
        "POST /contact_imports until GET says completed"
        if ARGS.through_api
        else "contact_import_run"
    )
    print(
        f"rows: {ROWS} ({len(data) / 1e6:.1f} MB CSV); load {os.getloadavg()[0]:.2f} at the "
        f"end; RECIPIENT_DOMAIN_CHECK={os.environ['RECIPIENT_DOMAIN_CHECK']}"
    )
    print(
        f"baseline (csv + psycopg INSERT ... ON CONFLICT): {base_seconds:.2f} s, {base_rate:,.0f} rows/s"
    )
    print(f"service ({where}): {service_seconds:.2f} s, {service_rate:,.0f} rows/s")
    ratio = service_rate / base_rate
    print(f"ratio: {ratio:.0%} (goal >= {GOAL:.0%}: {'met' if ratio >= GOAL else 'MISSED'})")


if __name__ == "__main__":
    main()
