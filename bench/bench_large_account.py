"""An account that already holds many contacts: a contact import into it, and its
contacts list, the statements whose plans depend on the account's size.

    DATABASE_URL=postgres://... REDIS_URL=redis://... \\
      .venv/bin/python bench/bench_large_account.py [existing] [rows] [pages]

`existing` contacts (default 200,000) are written once into one account, kept between
runs (same database: later runs reuse them) and ANALYZEd. Each run then times, each on a
fresh connection (as a worker or a web process starts with):

- the import of `rows` CSV rows (default 20,000; a quarter of them addresses the account
  already holds, updated; the rest new), in process as the worker's task runs it
  (`contact_import_run`); the new contacts are deleted afterwards, so every run starts
  from the same account;
- `pages` pages (default 100) of `GET /contacts?limit=100`, each following the previous
  one's `starting_after` (keyset pages deep into the account), then `pages` times
  `GET /contacts?email=<an address it holds>`, through Django's test client with API keys.

A statement prepared by psycopg (after prepare_threshold runs on a connection) may be
planned by PostgreSQL once for any parameters (a generic plan, after five executions,
when its estimated cost is not worse: plan_cache_mode=auto): what this measures. The
recipient domain check is off, as in bench/bench_import.py.
"""

import csv
import io
import os
import sys
import time
import uuid

os.environ.setdefault("RECIPIENT_DOMAIN_CHECK", "false")
os.environ["RATE_LIMIT_KEY_PREFIX"] = f"rl-bench-large-{uuid.uuid4().hex[:8]}"
os.environ.setdefault("API_KEYS_MAX", "1000000")
os.environ.setdefault("API_ACCOUNT_RATE_LIMIT", "1000000")
os.environ.setdefault("LOG_LEVEL", "WARNING")

from _setup import api_keys_create, prepare  # noqa: E402

prepare()

from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402

from accounts.models import Account  # noqa: E402
from outreach.contacts import imports  # noqa: E402
from outreach.models.contacts import Contact, ContactImport  # noqa: E402
from plans.models import Plan  # noqa: E402

ACCOUNT_EMAIL = "bench-large-account@example.com"
NEW_PREFIX = "new"


def account_with(existing: int) -> Account:
    account, _ = Account.objects.get_or_create(
        email=ACCOUNT_EMAIL, defaults={"plan": Plan.objects.get(slug="scale")}
    )
    held = Contact.objects.filter(account=account).count()
    if held < existing:
        started = time.perf_counter()
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO outreach_contact (id, account_id, email, email_lower, first_name,"
                " last_name, company, fields, timezone, created_at, updated_at)"
                " SELECT gen_random_uuid(), %s, 'old' || i || '@example' || (i %% 97) || '.org',"
                " 'old' || i || '@example' || (i %% 97) || '.org', 'First' || i, 'Last' || i,"
                " 'Co ' || (i %% 500), '{}'::jsonb, '', now() - i * interval '1 second',"
                " now() - i * interval '1 second'"
                " FROM generate_series(%s, %s - 1) AS i ON CONFLICT DO NOTHING",
                [account.pk, held, existing],
            )
            cursor.execute("ANALYZE outreach_contact")
        print(f"  wrote {existing - held} contacts in {time.perf_counter() - started:.1f} s")
    return account


def make_csv(rows: int, existing: int) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["email", "first_name", "last_name", "company", "job_title"])
    for i in range(rows):
        if i % 4 == 0:  # an address the account holds: updated
            email = f"old{(i * 7919) % existing}@example{((i * 7919) % existing) % 97}.org"
        else:
            email = f"{NEW_PREFIX}{i}@example{i % 97}.org"
        writer.writerow([email, f"First{i}", f"Last{i}", f"Co {i % 500}", "Engineer"])
    return out.getvalue().encode()


def new_contacts_drop(account) -> None:
    new = Contact.objects.filter(account=account, email_lower__startswith=NEW_PREFIX)
    new._raw_delete(new.db)
    imported = ContactImport.objects.filter(account=account)
    imported._raw_delete(imported.db)


def import_time(account, data: bytes) -> float:
    contact_import = ContactImport.objects.create(
        account=account, source_format="csv", source_data=data, filename="bench.csv"
    )
    connection.close()
    started = time.perf_counter()
    result = imports.contact_import_run(import_id=contact_import.pk)
    seconds = time.perf_counter() - started
    assert result.status == "completed", (result.status, result.failure_reason)
    return seconds


def list_times(account, pages: int, existing: int) -> tuple[float, float]:
    keys = api_keys_create(account, 10)
    clients = [Client(HTTP_AUTHORIZATION=f"Bearer {key}") for key in keys]
    connection.close()
    started = time.perf_counter()
    after = None
    for n in range(pages):
        query = "?limit=100" + (f"&starting_after={after}" if after else "")
        response = clients[n % len(clients)].get(f"/contacts{query}", secure=True)
        assert response.status_code == 200, response.content[:300]
        after = response.json()[-1]["id"]
    walk = time.perf_counter() - started
    started = time.perf_counter()
    for n in range(pages):
        i = (n * 104729) % existing
        response = clients[n % len(clients)].get(
            f"/contacts?email=old{i}@example{i % 97}.org", secure=True
        )
        assert response.status_code == 200, response.content[:300]
        assert len(response.json()) == 1
    return walk, time.perf_counter() - started


def main(existing: int, rows: int, pages: int) -> None:
    account = account_with(existing)
    new_contacts_drop(account)
    data = make_csv(rows, existing)
    try:
        seconds = import_time(account, data)
    finally:
        new_contacts_drop(account)
    walk, lookups = list_times(account, pages, existing)
    print(
        f"existing {existing}, rows {rows}, pages {pages}; load {os.getloadavg()[0]:.2f}\n"
        f"import: {seconds:.2f} s ({rows / seconds:,.0f} rows/s)\n"
        f"list pages: {walk:.2f} s ({pages / walk:,.1f} pages/s)\n"
        f"email lookups: {lookups:.2f} s ({pages / lookups:,.1f} requests/s)"
    )


if __name__ == "__main__":
    arguments = [int(value) for value in sys.argv[1:4]]
    main(*(arguments + [200_000, 20_000, 100][len(arguments) :]))
