"""A fleet, not a burst: N paced mailboxes on one campaign, the service as the Procfile
runs it (web, worker, webhooks, beat), dispatched through the HTTP API, against an SMTP
sink answering every command in 50-500 ms and never answering the end of DATA for 1% of
the senders. Does each mailbox keep its pace, and what does one worker host cost?

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/outreach_fleetbench \\
    REDIS_URL=redis://127.0.0.1:6379/11 \\
      .venv/bin/python bench/bench_fleet.py --mailboxes 1000 --duration 180
      (--hang-fraction 0: no hanging sender, to compare; --profile 60: py-spy on the
      sending worker for 60 s in the middle of the run, and three `py-spy dump`s)

The world: N mailboxes (security none, no login, 127.0.0.1:<sink>, daily limit
100,000, pace `--pace MIN,MAX` seconds), on campaigns of `--per-campaign` mailboxes
(rotation), step 1 text + HTML; contacts = N x (1 + duration / MIN) x 1.2, shared out among
the campaigns, enrolled (pending). Every 1/fraction-th mailbox (mailbox0, mailbox100, ...
at 1%) is on the sink's hang list: the sink reads its whole message and never answers
the end of DATA. The service (the Procfile, its web server included) starts first; then the
world is made as an operator makes it (`--setup api`, the default: bench/_fleet_api.py,
`POST /smtp_credentials` and `POST /campaigns` from `--api-threads` client threads with
a key each, API_ACCOUNT_RATE_LIMIT raised; a campaign names at most 100 mailboxes, so
100 a campaign), or through the ORM (`--setup orm`, quick: bench/_setup.py, all on one
campaign unless `--per-campaign`); the contacts and enrollments through the ORM either
way. The dispatch is every campaign's `POST /campaigns/:id/dispatch`, from the client
pool, and the clock starts at the first call. The run lasts `--duration` seconds from
it; then the figures are taken and everything stops.

Figures, from the sink's log alone (one line per accepted message: time, MAIL FROM,
RCPT TO), for the healthy mailboxes (not on the hang list):
* gaps between a mailbox's consecutive messages: median, p99; excess = gap - pace max,
  its p99 over every gap;
* messages against the pace's expectation: expected = healthy mailboxes x the sends one
  mailbox makes in the run when its first goes at the dispatch and each next one a gap
  drawn uniformly from the pace later (`pace_expected`: 1 + T / mean(pace) - about 0.5
  over a long run; 1.2 in 120 s at a 100-200 s pace). (Before, expected was
  (run end - dispatch) / mean(pace), close enough at a 10-20 s pace and 180 s, and far
  below the pace's own count at 100-200 s: it is still printed.);
* the first send's delay after the dispatch: median, p99, max;
* flow: messages per 10 s of the run.
And from the machine: CPU seconds of each process group (utime + stime of every process
of the group, and of its reaped children, /proc/<pid>/stat, at the dispatch and at the
run's end) and of the PostgreSQL backends connected to the bench database (each
backend's CPU between the first and last time the 0.5 s sampler saw it); commits
(pg_stat_database.xact_commit of the bench database) and WAL bytes (pg_current_wal_lsn,
the whole cluster's) per message; the peak of connections to the bench database.

It migrates, empties the broker's queues and deletes its accounts (bench-fleet-...)
before and after.
"""

import argparse
import contextlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

os.environ["OUTBOUND_ALLOW_PRIVATE_NETWORKS"] = "true"  # the sink is on loopback

from _peers import (  # noqa: E402
    LineLog,
    Service,
    broker_purge,
    mode_environment,
    process_stop,
    service_describe,
    service_env,
    sigterm_exits,
    smtp_sink_start,
)

LABEL = "fleet"
MODE = mode_environment(LABEL)

import _fleet_api as fleet_api  # noqa: E402
from _setup import (  # noqa: E402
    account_create,
    account_drop,
    api_keys_create,
    contacts_create,
    mailboxes_create,
    prepare,
    step_create,
)

GOAL_EXCESS_P99 = 5.0  # seconds
GOAL_EXPECTED = 0.9
GOAL_EXPECTED_FLEET = 0.95  # at a real pace (100-200 s), 10,000 mailboxes (issue 49)
GOAL_CORES_PER_100 = 1.0
GOAL_WAL_PER_SEND = 4096
GOAL_COMMITS_PER_SEND = 3.0
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def pct(values: list[float], q: float) -> float:
    """The q-quantile (0..1) of values, nearest rank."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]


def pace_expected(pace: tuple[int, int], seconds: float, draws: int = 20_000) -> float:
    """The mean number of sends of one mailbox in `seconds` from the dispatch, its first
    at the dispatch and each next one a gap drawn uniformly from [pace min, pace max]
    after the one before (the pace's own rule), over `draws` draws (fixed seed)."""
    import random

    rng = random.Random(49)
    total = 0
    for _ in range(draws):
        at, sends = 0.0, 0
        while at <= seconds:
            sends += 1
            at += rng.uniform(*pace)
        total += sends
    return total / draws


# ------------------------------------------------------------------ CPU, PostgreSQL


def _stat(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command (field 3 onwards), or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rpartition(")")[2].split()


def process_cpu(pid: int, *, children: bool = False) -> float:
    fields = _stat(pid)
    if fields is None:
        return 0.0
    ticks = int(fields[11]) + int(fields[12])  # utime, stime
    if children:
        ticks += int(fields[13]) + int(fields[14])  # cutime, cstime (reaped children)
    return ticks / CLOCK_TICKS


def group_pids(pgid: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat(int(entry.name))
            if fields is not None and int(fields[2]) == pgid:
                pids.append(int(entry.name))
    return pids


def group_cpu(pgid: int) -> float:
    """CPU seconds of every process of the group, its reaped children included."""
    return sum(process_cpu(pid, children=True) for pid in group_pids(pgid))


def worker_pid(pgid: int) -> int:
    """The Celery process of a Procfile line's group (the shell's child)."""
    for pid in group_pids(pgid):
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        if any(part.endswith(b"celery") for part in cmdline[:2]):
            return pid
    raise RuntimeError(f"no celery process in group {pgid}")


def admin_conninfo() -> tuple[str, str]:
    """DATABASE_URL pointed at the `postgres` database (the sampler's own queries are
    not the bench database's commits), and the bench database's name."""
    parts = urlsplit(os.environ["DATABASE_URL"])
    return urlunsplit(parts._replace(path="/postgres")), parts.path.lstrip("/")


class PgSampler(threading.Thread):
    """Every 0.5 s: the bench database's connections (count, peak) and each backend's
    CPU (first and last reading)."""

    def __init__(self, conninfo: str, database: str):
        super().__init__(daemon=True)
        import psycopg

        self.conn = psycopg.connect(conninfo, autocommit=True)
        self.database = database
        self.stop_event = threading.Event()
        self.peak = 0
        self.samples: list[tuple[float, int]] = []
        self.backend_cpu: dict[int, list[float]] = {}  # pid -> [first, last]
        # statement (first 300 characters) -> [longest seen running, times seen over 1 s]
        self.slow: dict[str, list] = {}
        self.lock = threading.Lock()
        self.wal_copy: Path | None = None  # copy the cluster's WAL segments here
        self.wal_from = ""  # first segment to copy
        self.wal_copied: set[str] = set()
        self.data_directory = self.conn.execute("SHOW data_directory").fetchone()[0]

    def run(self) -> None:
        while not self.stop_event.is_set():
            rows = self.conn.execute(
                "SELECT pid, state = 'active' AND now() - query_start > interval '1 second', "
                "extract(epoch FROM now() - query_start), left(query, 300) "
                "FROM pg_stat_activity WHERE datname = %s",
                [self.database],
            ).fetchall()
            now = time.time()
            with self.lock:
                self.samples.append((now, len(rows)))
                self.peak = max(self.peak, len(rows))
                for pid, slow, seconds, query in rows:
                    cpu = process_cpu(pid)
                    entry = self.backend_cpu.setdefault(pid, [cpu, cpu])
                    entry[1] = cpu
                    if slow:
                        seen = self.slow.setdefault(query, [0.0, 0])
                        seen[0] = max(seen[0], float(seconds))
                        seen[1] += 1
                if self.wal_copy is not None:
                    self.wal_segments_copy(last=False)
            self.stop_event.wait(0.5)

    def wal_segments_copy(self, *, last: bool) -> None:
        """Copy the WAL segments written since `wal_from` (complete ones, and with
        `last` the one being written too) before the server recycles them."""
        current = self.conn.execute("SELECT pg_walfile_name(pg_current_wal_lsn())").fetchone()[0]
        for path in sorted(Path(self.data_directory, "pg_wal").glob("0*")):
            name = path.name
            if len(name) != 24 or name < self.wal_from or name in self.wal_copied:
                continue
            if name < current or (last and name == current):
                with contextlib.suppress(FileNotFoundError):
                    shutil.copyfile(path, self.wal_copy / name)
                    self.wal_copied.add(name)

    def backends_cpu(self) -> float:
        with self.lock:
            return sum(last - first for first, last in self.backend_cpu.values())

    def counters(self) -> tuple[int, int, str]:
        """(xact_commit of the bench database, the cluster's WAL position in bytes and
        as text)."""
        commits = self.conn.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = %s", [self.database]
        ).fetchone()[0]
        lsn, text = self.conn.execute(
            "SELECT pg_current_wal_lsn() - '0/0'::pg_lsn, pg_current_wal_lsn()::text"
        ).fetchone()
        return int(commits), int(lsn), text

    def close(self) -> None:
        self.stop_event.set()
        self.join(timeout=5)
        self.conn.close()


WALDUMP_RECORD = re.compile(r"len \(rec/tot\):\s*\d+/\s*(\d+), tx:\s*(\d+),.*?desc: (\w+)")
WALDUMP_REL = re.compile(r"rel \d+/(\d+)/\d+")


def database_wal(
    conninfo: str, database: str, segments: Path, start: str, end: str
) -> tuple[int, int] | str:
    """The bench database's share of the WAL between two positions, read by pg_waldump
    from the segments copied during the run (this machine's server, readable here): the
    bytes of every record touching one of its relations, plus every record (commits
    included) of a transaction that did; and those transactions' COMMIT records (the
    writing commits). A string says why not."""
    import psycopg

    with psycopg.connect(conninfo, autocommit=True) as conn:
        row = conn.execute("SELECT oid FROM pg_database WHERE datname = %s", [database]).fetchone()
        oid = str(row[0])
        version = conn.execute("SHOW server_version_num").fetchone()[0][:-4]
    waldump = Path(f"/usr/lib/postgresql/{version}/bin/pg_waldump")
    if not waldump.exists():
        return f"no {waldump}"
    done = subprocess.run(  # noqa: S603
        [str(waldump), "-p", str(segments), "-s", start, "-e", end],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode and not done.stdout:
        return f"pg_waldump: {done.stderr.strip()[:300]}"
    ours: set[str] = set()
    by_tx: dict[str, int] = defaultdict(int)
    commits: dict[str, int] = defaultdict(int)
    total = 0
    for line in done.stdout.splitlines():
        match = WALDUMP_RECORD.search(line)
        if not match:
            continue
        size, tx, desc = int(match[1]), match[2], match[3]
        mine = any(db == oid for db in WALDUMP_REL.findall(line))
        if mine:
            total += size
            if tx != "0":
                ours.add(tx)
        elif tx != "0":
            by_tx[tx] += size
        if desc == "COMMIT" and tx != "0":
            commits[tx] += 1
    total += sum(size for tx, size in by_tx.items() if tx in ours)
    return total, sum(1 for tx in commits if tx in ours)


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


# ---------------------------------------------------------------------------- run


@dataclass
class Run:
    mailboxes: int
    pace: tuple[int, int]
    duration: float
    contacts: int
    healthy: set = field(default_factory=set)
    hanging: set = field(default_factory=set)
    dispatched_at: float = 0.0
    run_end: float = 0.0
    dispatch_status: int = 0
    dispatch_body: str = ""
    dispatch_seconds: float = 0.0
    accepted: list = field(default_factory=list)  # (time, mail from), all lines
    cpu: dict = field(default_factory=dict)  # name -> seconds over the run
    backends_cpu: float = 0.0
    commits: int = 0
    wal: int = 0
    background_wal_rate: float = 0.0  # bytes/s over the 10 s before the dispatch
    peak_connections: int = 0
    slow_statements: list = field(default_factory=list)  # (statement, [longest, seen])
    database_wal: tuple | str = "not read"  # (bytes, writing commits) from pg_waldump
    load_before: str = ""
    load_after: str = ""
    statuses: dict = field(default_factory=dict)
    stopped_cleanly: dict = field(default_factory=dict)
    stop_seconds: dict = field(default_factory=dict)
    logs: Path | None = None
    setup_seconds: dict = field(default_factory=dict)  # what -> seconds
    api_calls: fleet_api.Calls = field(default_factory=fleet_api.Calls)


def accounts_purge() -> None:
    from accounts.models import Account

    for account in Account.objects.filter(email__startswith=f"bench-{LABEL}-"):
        account_drop(account)


def setup(run: Run, port: int, hang_every: int, args) -> tuple:
    """The account (scale plan), API keys (`--api-threads`, one per client thread), the
    mailboxes, the campaigns (`--per-campaign` mailboxes each) with their step, the
    contacts and their pending enrollments. With `--setup api` the mailboxes and the
    campaigns go through the HTTP API (bench/_fleet_api.py; the web must be up), else
    through the ORM. Returns (account, [campaign id, ...], [API key, ...])."""
    from django.db import connection

    from outreach.models.campaigns import Campaign
    from outreach.models.sending import Enrollment

    account = account_create(LABEL, plan="scale")
    # (Their signup address verified: the API's writes require it.)
    keys = api_keys_create(account, args.api_threads)
    per_campaign = args.per_campaign or run.mailboxes
    started = time.time()
    if args.setup == "api":
        created = fleet_api.mailboxes_create(
            keys, run.mailboxes, port=port, pace=run.pace, calls=run.api_calls
        )
        run.setup_seconds["mailboxes (API)"] = time.time() - started
        emails = [email for _, email in created]
        started = time.time()
        campaign_ids = fleet_api.campaigns_create(
            keys, [pk for pk, _ in created], per_campaign=per_campaign, calls=run.api_calls
        )
        run.setup_seconds["campaigns (API)"] = time.time() - started
        campaigns = list(Campaign.objects.filter(pk__in=campaign_ids))
        campaigns.sort(key=lambda c: campaign_ids.index(str(c.pk)))
    else:
        credentials = mailboxes_create(
            account,
            run.mailboxes,
            port=port,
            min_interval_seconds=run.pace[0],
            max_interval_seconds=run.pace[1],
        )
        emails = [credential.from_email for credential in credentials]
        campaigns = []
        for n, start in enumerate(range(0, run.mailboxes, per_campaign)):
            campaign = Campaign.objects.create(account=account, name=f"fleet {n}")
            campaign.credentials.add(*credentials[start : start + per_campaign])
            step_create(campaign)
            campaigns.append(campaign)
        run.setup_seconds["mailboxes and campaigns (ORM)"] = time.time() - started
    for i, email in enumerate(emails):
        hangs = hang_every and i % hang_every == 0
        (run.hanging if hangs else run.healthy).add(email)
    # The contacts, shared out among the campaigns as their mailboxes are.
    started = time.time()
    shares = [min(per_campaign, run.mailboxes - n * per_campaign) for n in range(len(campaigns))]
    offset = 0
    for campaign, share in zip(campaigns, shares, strict=True):
        count = run.contacts * share // run.mailboxes
        for start in range(offset, offset + count, 10_000):
            contacts = contacts_create(account, min(10_000, offset + count - start), start=start)
            Enrollment.objects.bulk_create(
                (Enrollment(campaign=campaign, contact=contact) for contact in contacts),
                batch_size=5_000,
            )
        offset += count
    run.contacts = offset
    run.setup_seconds["contacts and enrollments (ORM)"] = time.time() - started
    if args.analyze:
        # Statistics of the rows just written, as autovacuum would have them on a database
        # in service. Without (`--no-analyze`) the planner may plan from an empty table's
        # statistics: the dispatch's UPDATE ran for minutes, the scheduler's scan for 20 s.
        with connection.cursor() as cursor:
            cursor.execute(
                "ANALYZE outreach_enrollment, outreach_contact, outreach_smtpcredential, "
                "outreach_campaign_credentials, outreach_campaign, outreach_sendclaim"
            )
    return account, [str(c.pk) for c in campaigns], keys


def dispatch(run: Run, campaign_ids: list[str], keys: list[str]) -> tuple[int, str]:
    """Every campaign's `POST /campaigns/:id/dispatch`, from the client pool: (200 or
    the first failure's status, a summary)."""
    try:
        done = fleet_api.campaigns_dispatch(keys, campaign_ids, calls=run.api_calls)
    except RuntimeError as error:
        return 500, str(error)
    slowest = max(seconds for *_, seconds in done)
    total = sum(count or 0 for _, count, _ in done)
    return 200, (
        f"{len(done)} campaign(s), {total} enrollments dispatched, slowest request "
        f"{slowest * 1000:.0f} ms"
    )


# The Procfile's process that runs the SMTP sessions (`-Q sending`).
SENDER = "sending"


class Profiler:
    """py-spy on the sending worker (the Procfile's sending: process, where the SMTP
    sessions run): `record --gil` (where its Python time goes, only the thread holding
    the interpreter lock sampled) for `seconds` from `at`, then three `dump`s (every
    thread's stack: what waits on what), 5 s apart."""

    def __init__(self, pid: int, directory: Path, seconds: int, at: float):
        self.pid, self.directory, self.seconds, self.at = pid, directory, seconds, at
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.spy = str(Path(sys.executable).parent / "py-spy")
        self.errors: list[str] = []

    def start(self) -> None:
        self.thread.start()

    def _call(self, args: list[str], output: Path) -> None:
        with open(output, "wb") as out:
            done = subprocess.run(  # noqa: S603
                [self.spy, *args], stdout=out, stderr=subprocess.PIPE, check=False
            )
        if done.returncode:
            self.errors.append(f"py-spy {args[0]}: {done.stderr.decode()[-500:]}")

    def _run(self) -> None:
        time.sleep(max(0.0, self.at - time.time()))
        raw = self.directory / "worker-gil.raw"
        self._call(
            ["record", "--pid", str(self.pid), "--duration", str(self.seconds), "--gil"]
            + ["--rate", "50", "--format", "raw", "--nonblocking", "-o", str(raw)],
            self.directory / "py-spy-record.out",
        )
        for n in range(3):
            self._call(["dump", "--pid", str(self.pid)], self.directory / f"worker-dump-{n}.txt")
            time.sleep(5)

    def join(self) -> None:
        self.thread.join()


def measure(args, run: Run, port: int, sink_log: LineLog, workdir: Path, sink_pgid: int) -> None:
    from django.db import connection
    from django.db.models import Count

    from outreach.models.sending import Enrollment

    hang_every = round(1 / args.hang_fraction) if args.hang_fraction else 0
    account = None
    try:
        conninfo, database = admin_conninfo()
        env = service_env()
        broker_purge()
        workdir.mkdir(parents=True, exist_ok=True)
        run.logs = workdir
        with Service(workdir, env, web=True) as service:
            service.start()
            # The world, with the service up (`--setup api` goes through its web).
            started = time.time()
            account, campaign_ids, keys = setup(run, port, hang_every, args)
            print(
                f"  setup (--setup {args.setup}{', then ANALYZE' if args.analyze else ''}): "
                f"{time.time() - started:.1f} s: "
                + ", ".join(
                    f"{what} {seconds:.1f} s" for what, seconds in run.setup_seconds.items()
                )
            )
            if run.api_calls.statuses:
                print(
                    f"    API answers: {dict(sorted(run.api_calls.statuses.items()))} "
                    f"({run.api_calls.limited} x 429 waited out)"
                )
            connection.close()  # the bench database's connections are the service's alone
            groups = {name: process.pid for name, process in service.processes.items()}
            sampler = PgSampler(conninfo, database)
            sampler.start()
            try:
                # The cluster's WAL with the service idle: everyone else's rate.
                _, wal_idle, _ = sampler.counters()
                time.sleep(10)
                _, wal_idle_end, _ = sampler.counters()
                run.background_wal_rate = (wal_idle_end - wal_idle) / 10
                profiler = None
                if args.profile:
                    pid = worker_pid(groups[SENDER if SENDER in groups else "worker"])
                    at = time.time() + max(5.0, (args.duration - args.profile) / 2)
                    profiler = Profiler(pid, workdir, args.profile, at)
                cpu_before = {name: group_cpu(pgid) for name, pgid in groups.items()}
                cpu_before["sink"] = group_cpu(sink_pgid)
                commits_before, wal_before, lsn_before = sampler.counters()
                with sampler.lock:
                    sampler.wal_from = sampler.conn.execute(
                        "SELECT pg_walfile_name(%s::pg_lsn)", [lsn_before]
                    ).fetchone()[0]
                    sampler.wal_copy = workdir / "wal"
                    sampler.wal_copy.mkdir(exist_ok=True)
                run.load_before = load()
                sink_log.skip()
                run.dispatched_at = time.time()
                run.dispatch_status, run.dispatch_body = dispatch(run, campaign_ids, keys)
                run.dispatch_seconds = time.time() - run.dispatched_at
                if run.dispatch_status != 200:
                    raise SystemExit(
                        f"dispatch answered HTTP {run.dispatch_status}: {run.dispatch_body}"
                    )
                run.run_end = run.dispatched_at + args.duration
                if profiler is not None:
                    profiler.start()
                next_note = run.dispatched_at + 30
                while time.time() < run.run_end:
                    for line in sink_log.read():
                        at, mail_from, _rcpt = line.split(" ", 2)
                        run.accepted.append((float(at), mail_from))
                    if not service.alive():
                        print("  a service process exited early; see its log")
                        break
                    if time.time() >= next_note:
                        print(
                            f"  +{time.time() - run.dispatched_at:.0f} s: "
                            f"{len(run.accepted)} accepted, load {load()}"
                        )
                        next_note += 30
                    time.sleep(0.2)
                commits_after, wal_after, lsn_after = sampler.counters()
                time.sleep(1)  # the WAL up to lsn_after reaches its files
                with sampler.lock:
                    sampler.wal_segments_copy(last=True)
                run.cpu = {
                    name: group_cpu(pgid) - cpu_before[name] for name, pgid in groups.items()
                }
                run.cpu["sink"] = group_cpu(sink_pgid) - cpu_before["sink"]
                run.backends_cpu = sampler.backends_cpu()
                run.load_after = load()
                run.commits = commits_after - commits_before
                run.wal = wal_after - wal_before
                for line in sink_log.read():
                    at, mail_from, _rcpt = line.split(" ", 2)
                    run.accepted.append((float(at), mail_from))
                if profiler is not None:
                    profiler.join()
                    for error in profiler.errors:
                        print(f"  {error}")
            finally:
                sampler.close()
            run.peak_connections = sampler.peak
            run.slow_statements = sorted(sampler.slow.items(), key=lambda kv: -kv[1][0])[:6]
            if sampler.wal_copy is not None:
                run.database_wal = database_wal(
                    conninfo, database, sampler.wal_copy, lsn_before, lsn_after
                )
                shutil.rmtree(sampler.wal_copy, ignore_errors=True)
            run.statuses = dict(
                Enrollment.objects.filter(campaign__account=account)
                .order_by()
                .values_list("status")
                .annotate(n=Count("id"))
            )
        run.stopped_cleanly = service.stopped_cleanly
        run.stop_seconds = service.stop_seconds
    finally:
        started = time.time()
        if account is not None:
            # Raw deletes: the ORM's cascade over a 600 s fleet's 84,000 contacts sends
            # more than 65,535 parameters in one query, and fails.
            account_drop(account)
        broker_purge()
        print(f"  bench account deleted in {time.time() - started:.1f} s")


# ------------------------------------------------------------------------ figures


def goal(ok: bool) -> str:
    return "met" if ok else "MISSED"


def report(run: Run) -> dict:
    t0, end = run.dispatched_at, run.run_end
    window = [(at, sender) for at, sender in run.accepted if t0 <= at <= end]
    by_sender: dict[str, list[float]] = defaultdict(list)
    for at, sender in window:
        by_sender[sender].append(at)
    healthy_sent = sum(len(by_sender[s]) for s in run.healthy)
    hanging_sent = sum(len(by_sender[s]) for s in run.hanging)
    strangers = sum(len(v) for s, v in by_sender.items() if s not in run.healthy | run.hanging)
    gaps = []
    for sender in run.healthy:
        times = sorted(by_sender[sender])
        gaps += [b - a for a, b in zip(times, times[1:], strict=False)]
    excess = [gap - run.pace[1] for gap in gaps]
    firsts = [min(by_sender[s]) - t0 for s in run.healthy if by_sender[s]]
    silent = sum(1 for s in run.healthy if not by_sender[s])
    mean_pace = (run.pace[0] + run.pace[1]) / 2
    per_mailbox = pace_expected(run.pace, end - t0)
    expected = len(run.healthy) * per_mailbox
    ratio = healthy_sent / expected if expected else 0.0
    before = len(run.healthy) * (end - t0) / mean_pace
    buckets = Counter(int((at - t0) // 10) for at, _ in window)
    series = [buckets.get(n, 0) for n in range(int((end - t0) // 10))]
    sent = len(window)
    rate = sent / (end - t0)
    # The sending engine: the scheduler's process and the sessions' (one before the
    # Procfile had a sending: line).
    worker_cores = (run.cpu.get("worker", 0.0) + run.cpu.get(SENDER, 0.0)) / (end - t0)
    cores_per_100 = worker_cores / rate * 100 if rate else float("inf")
    commits_per_send = run.commits / sent if sent else float("inf")
    wal_per_send = run.wal / sent if sent else float("inf")
    background = run.background_wal_rate * (end - t0)
    wal_net = (run.wal - background) / sent if sent else float("inf")

    print(f"  dispatch: HTTP {run.dispatch_status} in {run.dispatch_seconds * 1000:.0f} ms:")
    print(f"    {run.dispatch_body[:200]}")
    print(
        f"  mailboxes: {len(run.healthy)} healthy, {len(run.hanging)} on the hang list; "
        f"pace {run.pace[0]}-{run.pace[1]} s; {run.contacts} contacts; run "
        f"{end - t0:.0f} s from the dispatch"
    )
    print(
        f"  accepted in the run: {sent} ({rate:.1f} msg/s): healthy {healthy_sent}, hang list "
        f"{hanging_sent}" + (f", unknown senders {strangers}" if strangers else "")
    )
    print(
        f"  gaps (healthy, {len(gaps)}): median {statistics.median(gaps) if gaps else 0:.1f} s, "
        f"p99 {pct(gaps, 0.99):.1f} s, max {max(gaps, default=0):.1f} s; excess over "
        f"{run.pace[1]} s: p99 {pct(excess, 0.99):.1f} s "
        f"(goal < {GOAL_EXCESS_P99:.0f} s: {goal(pct(excess, 0.99) < GOAL_EXCESS_P99)}); "
        f"gaps over the max: {sum(1 for e in excess if e > 0)}"
    )
    print(
        f"  expected = healthy mailboxes x a mailbox's sends at its pace in the run (first "
        f"at the dispatch) = {len(run.healthy)} x {per_mailbox:.3f} = {expected:.0f}; sent "
        f"{healthy_sent}: {ratio:.1%} (goal >= {GOAL_EXPECTED:.0%}: "
        f"{goal(ratio >= GOAL_EXPECTED)}; >= {GOAL_EXPECTED_FLEET:.0%}: "
        f"{goal(ratio >= GOAL_EXPECTED_FLEET)}); the earlier figure, (run end - dispatch) "
        f"/ mean(pace): {before:.0f}, {healthy_sent / before if before else 0:.1%}"
    )
    print(
        f"  first send after the dispatch (healthy): median {pct(firsts, 0.5):.1f} s, "
        f"p99 {pct(firsts, 0.99):.1f} s, max {max(firsts, default=float('nan')):.1f} s"
        + (f"; {silent} healthy mailboxes sent nothing" if silent else "")
    )
    print(
        f"  flow, messages per 10 s: min {min(series, default=0)}, max "
        f"{max(series, default=0)}: {' '.join(map(str, series))}"
    )
    cpu = " ".join(f"{name} {seconds:.1f}" for name, seconds in run.cpu.items())
    print(
        f"  CPU seconds over the run (process groups, utime+stime incl. reaped children): "
        f"{cpu}; PostgreSQL backends of the bench database {run.backends_cpu:.1f}"
    )
    print(
        f"  worker + {SENDER}: {worker_cores:.2f} cores at {rate:.1f} msg/s = {cores_per_100:.2f} cores "
        f"per 100 msg/s (goal <= {GOAL_CORES_PER_100:g}: "
        f"{goal(cores_per_100 <= GOAL_CORES_PER_100)})"
    )
    # pg_stat_database counts every transaction, a read-only autocommit SELECT too; the
    # goal is about commits that write (WAL commit records: durable flushes), which
    # pg_waldump counts below when the WAL could be read.
    print(
        f"  transactions (pg_stat_database.xact_commit, read-only statements included): "
        f"{run.commits} = {commits_per_send:.2f} per message"
    )
    print(
        f"  WAL: {run.wal / 1024**2:.1f} MiB = {wal_per_send / 1024:.2f} KiB per message (goal "
        f"<= 4 KiB: {goal(wal_per_send <= GOAL_WAL_PER_SEND)}); the cluster's WAL, other "
        f"databases' too: {run.background_wal_rate / 1024:.1f} KiB/s with the service idle "
        f"before the dispatch, so {wal_net / 1024:.2f} KiB per message net of that"
    )
    if isinstance(run.database_wal, tuple):
        own, writes = run.database_wal
        print(
            f"  the bench database's own WAL (pg_waldump): {own / 1024**2:.1f} MiB = "
            f"{own / sent / 1024 if sent else float('inf'):.2f} KiB per message (goal <= 4 KiB: "
            f"{goal(sent > 0 and own / sent <= GOAL_WAL_PER_SEND)}); commits that write "
            f"(its transactions' commit records) {writes} = "
            f"{writes / sent if sent else float('inf'):.2f} per message (goal <= "
            f"{GOAL_COMMITS_PER_SEND:g}: "
            f"{goal(sent > 0 and writes / sent <= GOAL_COMMITS_PER_SEND)})"
        )
    else:
        print(f"  the bench database's own WAL: not measured ({run.database_wal})")
    print(
        f"  peak connections to the bench database: {run.peak_connections}; load "
        f"{run.load_before} at the dispatch, {run.load_after} at the end"
    )
    for statement, (longest, seen) in run.slow_statements:
        print(
            f"  statement running over 1 s ({seen} samples, longest {longest:.1f} s): {statement}"
        )
    print(f"  enrollments at the end: {run.statuses}")
    print(
        f"  stopped on SIGTERM: {run.stopped_cleanly}, in s: {run.stop_seconds}; logs: {run.logs}"
    )
    return {"gaps": gaps, "ratio": ratio}


def worker_log_report(paths: list[Path], t0: float, end: float) -> None:
    """send_mailboxes and schedule_sends from the workers' logs: runtimes, the tasks'
    occupancy (tasks running, from each `succeeded in` line's time and runtime), the
    mailboxes per task."""
    line_re = re.compile(
        r"^(\S+ \S+) INFO celery.app.trace Task outreach\.tasks\.(\w+)\[\S+\] "
        r"succeeded in ([\d.]+)s: (.*)$"
    )
    tasks: dict[str, list[tuple[float, float, str]]] = defaultdict(list)
    warnings = Counter()
    lines = [line for path in paths for line in path.read_text(errors="replace").splitlines()]
    for line in lines:
        match = line_re.match(line)
        if match:
            when = datetime.strptime(match[1], "%Y-%m-%d %H:%M:%S,%f").timestamp()
            tasks[match[2]].append((when - float(match[3]), when, match[4]))
        elif " WARNING " in line or " ERROR " in line:
            warnings[re.sub(r"[0-9a-f-]{36}", "<id>", line.split(" ", 3)[-1])[:90]] += 1
    batches = [t for t in tasks["send_mailboxes"] if t0 <= t[1] <= end + 60]
    runtimes = [b - a for a, b, _ in batches]
    if runtimes:
        mailboxes = [int(m[1]) for *_, r in batches if (m := re.search(r"'mailboxes': (\d+)", r))]
        print(
            f"  send_mailboxes: {len(runtimes)} ended, runtime median "
            f"{pct(runtimes, 0.5):.2f} s, p99 {pct(runtimes, 0.99):.2f} s, max "
            f"{max(runtimes):.1f} s; mailboxes per task median {pct(mailboxes, 0.5):.0f}, "
            f"max {max(mailboxes, default=0)}"
        )
    running = []
    for second in range(int(end - t0)):
        at = t0 + second
        running.append(sum(1 for a, b, _ in batches if a <= at < b))
    if running:
        per10 = [max(running[i : i + 10]) for i in range(0, len(running), 10)]
        print(
            f"  send_mailboxes running (max per 10 s): peak {max(running)}, mean "
            f"{statistics.mean(running):.0f}: {' '.join(map(str, per10))}"
        )
    ticks = [t for t in tasks["schedule_sends"] if t0 - 1 <= t[1] <= end]
    if ticks:
        durations = [b - a for a, b, _ in ticks]
        queued = [int(r) for _, _, r in ticks if r.isdigit()]
        print(
            f"  schedule_sends (non-idle): {len(ticks)} runs, duration median "
            f"{pct(durations, 0.5):.2f} s, p99 {pct(durations, 0.99):.2f} s, max "
            f"{max(durations):.2f} s; batches queued per run median {pct(queued, 0.5):.0f}, "
            f"max {max(queued, default=0)}"
        )
        # A run queues its batches on commit, before its own task ends: a batch
        # belongs to the last run that had started when it started.
        runs = sorted((a, b) for a, b, _ in ticks)
        waits = []
        for start, _, _ in batches:
            before = [b for a, b in runs if a <= start]
            if before:
                waits.append(start - before[-1])
        if waits:
            print(
                f"  send_mailboxes start - end of its scheduler run: median "
                f"{pct(waits, 0.5):.2f} s, p99 {pct(waits, 0.99):.2f} s, max {max(waits):.2f} s"
            )
        series = " ".join(f"{b - t0:.0f}:{b - a:.1f}s/{r}" for a, b, r in ticks)
        print(f"  scheduler runs (+s: duration/batches): {series}")
    for text, count in warnings.most_common(8):
        print(f"  worker log x{count}: {text}")


FRAME = re.compile(r"^(.*) \((.*?)(?::\d+)?\)$")


def profile_report(raw: Path, top: int = 15) -> None:
    """py-spy's raw stacks (`frame;frame;... count`, root first): the share of samples
    per function where it ran itself (the leaf) and where it was on the stack."""
    if not raw.exists() or not raw.read_text().strip():
        print(f"  py-spy: no samples in {raw}")
        return
    leaf: Counter = Counter()
    inclusive: Counter = Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        total += n
        names = []
        for frame in stack.split(";"):
            match = FRAME.match(frame)
            name = match[1] if match else frame
            where = match[2] if match else ""
            where = where.split("site-packages/")[-1].replace(str(Path.cwd()) + "/", "")
            names.append(f"{name} ({where})")
        leaf[names[-1]] += n
        for name in set(names):
            inclusive[name] += n
    print(f"  py-spy --gil: {total} samples (the thread holding the interpreter lock)")
    print("    self (leaf) share:")
    for name, n in leaf.most_common(top):
        print(f"      {n / total:6.1%}  {name}")
    print("    on the stack (inclusive), project and library frames:")
    shown = 0
    for name, n in inclusive.most_common():
        if n == total or "threading.py" in name or "<module>" in name:
            continue
        print(f"      {n / total:6.1%}  {name}")
        shown += 1
        if shown >= 2 * top:
            break


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mailboxes", type=int, default=1000)
    parser.add_argument("--pace", default="10,20", help="MIN,MAX seconds between sends")
    parser.add_argument("--duration", type=float, default=180, help="seconds from the dispatch")
    parser.add_argument("--reply-delay-range", default="0.05,0.5", help="MIN,MAX seconds")
    parser.add_argument(
        "--hang-fraction", type=float, default=0.01, help="senders whose DATA never ends"
    )
    parser.add_argument(
        "--contacts", type=int, default=None, help="default N x (1 + duration / MIN) x 1.2"
    )
    parser.add_argument(
        "--no-analyze",
        action="store_false",
        dest="analyze",
        help="no ANALYZE after the setup: the planner keeps whatever statistics it had",
    )
    parser.add_argument(
        "--setup",
        choices=("api", "orm"),
        default="api",
        help="mailboxes and campaigns through the HTTP API, as an operator makes them "
        "(default), or through the ORM (quick)",
    )
    parser.add_argument(
        "--per-campaign",
        type=int,
        default=None,
        help=f"mailboxes per campaign (default: {fleet_api.CAMPAIGN_MAX_MAILBOXES}, the most "
        "a campaign names through the API, with --setup api; all on one with --setup orm)",
    )
    parser.add_argument(
        "--api-threads",
        type=int,
        default=20,
        help="client threads, one API key each (an account holds API_KEYS_MAX keys, 20)",
    )
    parser.add_argument(
        "--profile", type=int, default=0, help="py-spy the worker this many seconds mid-run"
    )
    args = parser.parse_args()
    if args.per_campaign is None:
        args.per_campaign = fleet_api.CAMPAIGN_MAX_MAILBOXES if args.setup == "api" else 0
    if args.setup == "api" and args.per_campaign > fleet_api.CAMPAIGN_MAX_MAILBOXES:
        sys.exit(f"a campaign names at most {fleet_api.CAMPAIGN_MAX_MAILBOXES} mailboxes (API)")
    # An operator provisioning a fleet through the API raises the account's rate limit
    # (each key keeps its 60 a minute): bench/_fleet_api.py.
    os.environ.setdefault("API_ACCOUNT_RATE_LIMIT", fleet_api.RATE_LIMIT)
    if MODE != "production":
        print("note: embedded mode (no DATABASE_URL and REDIS_URL); the figures are for both")
    low, high = (int(x) for x in args.pace.split(","))
    delays = tuple(float(x) for x in args.reply_delay_range.split(","))
    # A mailbox's first send goes at the dispatch, then one a pace's gap: 1 + duration / MIN
    # sends at most (with 20% to spare).
    contacts = args.contacts or int(args.mailboxes * (1 + args.duration / low) * 1.2)
    run = Run(mailboxes=args.mailboxes, pace=(low, high), duration=args.duration, contacts=contacts)
    sigterm_exits()
    prepare()
    accounts_purge()
    from tests.support.ports import free_port

    workdir = Path(tempfile.mkdtemp(prefix="bench-fleet-"))
    hang_file = workdir / "hang.txt"
    hang_every = round(1 / args.hang_fraction) if args.hang_fraction else 0
    hang_file.write_text(
        "".join(
            f"mailbox{i}@sender{i}.example\n"
            for i in range(args.mailboxes)
            if hang_every and i % hang_every == 0
        )
    )
    port = free_port()
    # The web's address (the Procfile's default, 127.0.0.1:8000, may be anyone's).
    os.environ["BIND"] = f"127.0.0.1:{free_port()}"
    os.environ["BASE_URL"] = f"http://{os.environ['BIND']}"
    sink_log = LineLog(workdir / "sink.log")
    sink = smtp_sink_start(
        port=port, log=sink_log.path, reply_delay_range=delays, hang_data_from=hang_file
    )
    print(
        f"fleet: {args.mailboxes} mailboxes paced {low}-{high} s, "
        f"{args.per_campaign or args.mailboxes} a campaign, set up through the "
        f"{args.setup.upper()}, {contacts} "
        f"contacts, {args.duration:.0f} s; sink: each reply after U[{delays[0]}, {delays[1]}] "
        f"s, end of DATA never answered for every {hang_every or 'no'}th sender; "
        f"load {load()}"
    )
    service_describe(
        "BIND", "WORKER_CONCURRENCY", "DB_POOL_MAX_SIZE", "API_ACCOUNT_RATE_LIMIT", web=True
    )
    try:
        measure(args, run, port, sink_log, workdir / "service", sink.pid)
    finally:
        process_stop(sink)
    print(f"\nmode: {MODE}")
    report(run)
    logs = [workdir / "service" / f"{name}.log" for name in ("worker", SENDER)]
    worker_log_report([log for log in logs if log.exists()], run.dispatched_at, run.run_end)
    if args.profile:
        profile_report(workdir / "service" / "worker-gil.raw")
        print(f"  py-spy: {workdir / 'service'}/worker-gil.raw, worker-dump-*.txt")


if __name__ == "__main__":
    main()
