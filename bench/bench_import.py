"""Contact import throughput: the service (POST /contact_imports' worker path) against
reading the same CSV with the csv module and inserting the rows with psycopg (INSERT ...
ON CONFLICT, 1,000 rows per statement), same run.

    DATABASE_URL=postgres://... REDIS_URL=... .venv/bin/python bench/bench_import.py [rows]

Goal: the service reaches at least 50% of the baseline's rows per second.
"""

import csv
import io
import sys
import time
import uuid

from _setup import account_create, account_drop, prepare

prepare()

import psycopg  # noqa: E402
from django.db import connection  # noqa: E402
from django.utils import timezone  # noqa: E402
from psycopg.types.json import Jsonb  # noqa: E402

from outreach.contacts import imports  # noqa: E402
from outreach.contacts.models import Contact, ContactImport  # noqa: E402

ROWS = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000


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


def main():
    data = make_csv(ROWS)
    base_account = account_create("import-baseline")
    service_account = account_create("import-service")
    try:
        base_seconds = baseline(data, base_account)
        service_seconds, result = service(data, service_account)
        assert result.status == "completed", result.failure_reason
        assert result.created_count == ROWS, result.created_count
        assert Contact.objects.filter(account=service_account).count() == ROWS
    finally:
        account_drop(base_account)
        account_drop(service_account)
    base_rate = ROWS / base_seconds
    service_rate = ROWS / service_seconds
    print(f"rows: {ROWS} ({len(data) / 1e6:.1f} MB CSV)")
    print(
        f"baseline (csv + psycopg INSERT ... ON CONFLICT): {base_seconds:.2f} s, {base_rate:,.0f} rows/s"
    )
    print(f"service (contact_import_run): {service_seconds:.2f} s, {service_rate:,.0f} rows/s")
    print(f"ratio: {service_rate / base_rate:.0%} (goal >= 50%)")


if __name__ == "__main__":
    main()
