"""Contact import throughput: the service (POST /contact_imports' worker path) against
reading the same CSV with the csv module and bulk-inserting the rows, same run.

    DATABASE_URL=postgres://... REDIS_URL=... .venv/bin/python bench/bench_import.py [rows]

Goal: the service reaches at least 50% of the baseline's rows per second.
"""

import csv
import io
import sys
import time

from _setup import account_create, account_drop, prepare

prepare()

from outreach import services  # noqa: E402
from outreach.models import Contact, ContactImport  # noqa: E402

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
    """csv module + Contact bulk_create (1,000 per INSERT), nothing else."""
    started = time.perf_counter()
    reader = csv.DictReader(io.StringIO(data.decode()))
    batch = []
    for row in reader:
        email = row["email"]
        batch.append(
            Contact(
                account=account,
                email=email,
                email_lower=email.lower(),
                first_name=row["first_name"],
                last_name=row["last_name"],
                company=row["company"],
                fields={"job_title": row["job_title"]},
            )
        )
        if len(batch) == 1000:
            Contact.objects.bulk_create(batch)
            batch = []
    if batch:
        Contact.objects.bulk_create(batch)
    return time.perf_counter() - started


def service(data: bytes, account) -> tuple[float, ContactImport]:
    contact_import = ContactImport.objects.create(
        account=account, source_format="csv", source_data=data, filename="bench.csv"
    )
    started = time.perf_counter()
    result = services.contact_import_run(import_id=contact_import.pk)
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
    print(f"baseline (csv + bulk_create): {base_seconds:.2f} s, {base_rate:,.0f} rows/s")
    print(f"service (contact_import_run): {service_seconds:.2f} s, {service_rate:,.0f} rows/s")
    print(f"ratio: {service_rate / base_rate:.0%} (goal >= 50%)")


if __name__ == "__main__":
    main()
