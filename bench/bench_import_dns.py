"""Contact import with the recipient domain check (RECIPIENT_DOMAIN_CHECK) against the
same import without it, same run, against a real DNS server answering every question
20 ms late (tests/support/dns_server.py, in a process of its own).

    DATABASE_URL=postgres://... REDIS_URL=... .venv/bin/python bench/bench_import_dns.py \
        [rows] [distinct domains]

Goal: with the check, at most 1.5x the time without it (per-domain caching, concurrent
look-ups: DNS_LOOKUP_CONCURRENCY).
"""

import csv
import io
import os
import subprocess
import sys
import time

from _setup import ROOT, account_create, account_drop, prepare

prepare()

from django.conf import settings  # noqa: E402

from outreach.contacts import imports  # noqa: E402
from outreach.models.contacts import Contact, ContactImport  # noqa: E402

sys.path.insert(0, str(ROOT))
from tests.support.ports import free_port, wait_for_port  # noqa: E402

ROWS = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
DOMAINS = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000
DELAY = 0.02


def make_csv(rows: int, domains: int, tag: str) -> bytes:
    """Ten-odd people per company: rows spread over `domains` company domains."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["email", "first_name", "last_name", "company"])
    for i in range(rows):
        writer.writerow(
            [f"p{i}@{tag}{i % domains}.example.net", f"First{i}", f"Last{i}", f"Co {i % domains}"]
        )
    return out.getvalue().encode()


def run(data: bytes, account, *, check: bool) -> tuple[float, float]:
    """The import's seconds, and the CPU seconds this process spent on it (all threads)."""
    settings.RECIPIENT_DOMAIN_CHECK = check
    contact_import = ContactImport.objects.create(
        account=account, source_format="csv", source_data=data, filename="bench.csv"
    )
    started, cpu = time.perf_counter(), time.process_time()
    result = imports.contact_import_run(import_id=contact_import.pk)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    assert result.status == "completed", result.failure_reason
    assert result.created_count == ROWS, (result.created_count, result.errors[:3])
    return seconds, cpu


def cpu_seconds(pid: int) -> float | None:
    """A process's CPU seconds so far (Linux's /proc; None elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    port = free_port()
    server = subprocess.Popen(  # noqa: S603 - our own script
        [
            sys.executable,
            "-m",
            "tests.support.dns_server",
            "--port",
            str(port),
            "--delay",
            str(DELAY),
            "--wildcard-mx",
            "example.net",
            "--count",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    wait_for_port(port, process=server)  # its TCP listener: the UDP one is up before it
    settings.DNS_RESOLVERS = f"127.0.0.1:{port}"
    plain_account = account_create("import-dns-off")
    checked_account = account_create("import-dns-on")
    try:
        # Each run its own domains: nothing cached from the other.
        plain, plain_cpu = run(make_csv(ROWS, DOMAINS, "off"), plain_account, check=False)
        server_before = cpu_seconds(server.pid)
        checked, checked_cpu = run(make_csv(ROWS, DOMAINS, "on"), checked_account, check=True)
        server_after = cpu_seconds(server.pid)
        assert Contact.objects.filter(account=checked_account).count() == ROWS
    finally:
        account_drop(plain_account)
        account_drop(checked_account)
        server.terminate()
    out, _ = server.communicate(timeout=30)
    asked = int(out.strip().splitlines()[-1].split()[0])
    print(f"rows: {ROWS}, distinct domains: {DOMAINS}, DNS answers {DELAY * 1000:.0f} ms late")
    print(f"without the check: {plain:.2f} s, {ROWS / plain:,.0f} rows/s, {plain_cpu:.2f} s CPU")
    print(
        f"with the check: {checked:.2f} s, {ROWS / checked:,.0f} rows/s, {checked_cpu:.2f} s CPU "
        f"({asked} MX questions, {settings.DNS_LOOKUP_CONCURRENCY} at once)"
    )
    if server_before is not None and server_after is not None:
        print(
            f"DNS server (another process) during the import with the check: "
            f"{server_after - server_before:.2f} s CPU"
        )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"ratio: {checked / plain:.2f}x (goal <= 1.5x)")


if __name__ == "__main__":
    main()
