"""Sending to slow mail servers: the service as deployed (the Procfile's worker and beat)
against plain SMTP clients at the same concurrency, in the same run.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/outreach_latbench \\
    REDIS_URL=redis://127.0.0.1:6379/6 \\
      .venv/bin/python bench/bench_latency_sending.py --mailboxes 100 --timeout 300
      (--mailboxes 10,100,500 runs a curve, one point after the other)
    .venv/bin/python bench/bench_latency_sending.py --mailboxes 100 --timeout 300
      (no DATABASE_URL, no REDIS_URL: the embedded mode, below)
    ... bench/bench_latency_sending.py --mailboxes 100 --timeout 300 --through-api
      (from outside: the Procfile's web too, and the dispatch through the HTTP API)

The world: N mailboxes (SMTP credentials: security none, no login, daily limit far
away) served by ONE SMTP sink process (tests/support/smtp.py) that answers every
command 50 ms late (banner and EHLO included) and the end of DATA 200 ms late, as real
servers do; 5 messages per mailbox (step 1 of a campaign, text + HTML, personalised).

Baseline: N threads, each with one plain smtplib connection sending its mailbox's 5
messages, rendered beforehand by the service's own message_build; time from the start
until the last 250 to an end of DATA.

Service: one campaign with all N mailboxes (rotation: each mailbox gets 5 of the N x 5
enrollments; `--layout per-mailbox` makes one campaign per mailbox instead); the worker
and beat started exactly as the Procfile's `worker:` and `beat:` lines say, through a
shell, with this process's environment: the production mode's DATABASE_URL and
REDIS_URL, or without them the embedded mode's (a fresh VAR_DIR in a temporary
directory: the embedded PostgreSQL, which this process starts and stops, and kombu's
filesystem broker; bench/_peers.py's mode_environment); once the worker is ready, the
dispatch (outreach.campaigns.dispatch.campaign_dispatch, what POST /campaigns/:id/dispatch runs)
and the time from its start until the sink accepted the last message (the sink logs
each 250). With `--through-api` the whole Procfile runs (its `web:` line too, on a free
port: bench/_peers.py's Service(web=True), as bench/bench_fleet.py runs it) and the
dispatch is `POST /campaigns/:id/dispatch` with an API key of the account (its address
verified), the clock starting at that request: what a user of the API gets. The run
stops waiting after --timeout seconds and reports what was sent.

Goal: the service's messages per second >= 50% of the baseline's.
It migrates the database, empties the broker's queues and deletes the accounts it
made (bench-latency-...@example.com) before and after.
"""

import argparse
import os
import re
import smtplib
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

os.environ["CELERY_TASK_ALWAYS_EAGER"] = "false"  # this process's dispatch: the real broker
os.environ["OUTBOUND_ALLOW_PRIVATE_NETWORKS"] = "true"  # the sink is on loopback

from _peers import (  # noqa: E402
    LineLog,
    Service,
    api_call,
    broker_purge,
    mode_environment,
    process_stop,
    service_describe,
    service_env,
    sigterm_exits,
    smtp_sink_start,
    web_bind,
    web_warm,
)

LABEL = "latency-sending"
# production or embedded: its environment set before Django is (_setup).
MODE = mode_environment(LABEL)

from _setup import (  # noqa: E402
    account_create,
    api_keys_create,
    contacts_create,
    mailboxes_create,
    messages_render,
    prepare,
    step_create,
)

GOAL = 0.5
# From outside (issue 32): the burst at 100 mailboxes >= 0.6, the 500-mailbox point >= 0.3.
GOALS_API = {100: 0.6, 500: 0.3}
# Per-message pacing (a pause between one mailbox's sends) would make the comparison
# meaningless: switched off on any model field that looks like it. None exist yet.
PACING = re.compile(r"pac(e|ing)|interval|jitter|spacing|gap|min_delay|delay_seconds")


@dataclass
class Point:
    mailboxes: int
    messages: int
    baseline_seconds: float = 0.0
    baseline_errors: list = field(default_factory=list)
    started: float = 0.0  # unix time of the dispatch's start
    dispatch_seconds: float = 0.0
    accepted: list = field(default_factory=list)  # (unix time, mail from)
    waited: float = 0.0  # from the dispatch's start until done or the timeout
    statuses: dict = field(default_factory=dict)
    stopped_cleanly: dict = field(default_factory=dict)
    through_api: bool = False

    @property
    def goal(self) -> float:
        return GOALS_API.get(self.mailboxes, GOAL) if self.through_api else GOAL

    @property
    def complete(self) -> bool:
        return len(self.accepted) >= self.messages

    @property
    def baseline_rate(self) -> float:
        return self.messages / self.baseline_seconds

    @property
    def service_rate(self) -> float:
        return len(self.accepted) / self.waited if self.waited else 0.0

    @property
    def ratio(self) -> float:
        return self.service_rate / self.baseline_rate


def _ms(seconds: list[float]) -> str:
    return ", ".join(f"{s * 1000:.0f} ms" for s in seconds)


def pacing_off(model) -> dict:
    from django.db import models

    values = {}
    for f in model._meta.concrete_fields:
        if not PACING.search(f.name) or f.primary_key or f.is_relation:
            continue
        if isinstance(f, models.BooleanField):
            values[f.name] = False
        elif f.null:
            values[f.name] = None
        elif isinstance(f, models.IntegerField | models.FloatField | models.DecimalField):
            values[f.name] = 0
    return values


def accounts_purge() -> None:
    from accounts.models import Account

    Account.objects.filter(email__startswith=f"bench-{LABEL}-").delete()


def baseline(port: int, mailboxes: list[tuple[str, list]]) -> tuple[float, list]:
    """One thread and one smtplib connection per mailbox, started together; seconds
    until the last message was accepted."""
    barrier = threading.Barrier(len(mailboxes) + 1)
    done_at: list[float] = []
    errors: list[str] = []

    def run(from_email, messages):
        barrier.wait()
        try:
            conn = smtplib.SMTP("127.0.0.1", port, timeout=60)
            conn.ehlo()
            for outgoing in messages:
                conn.sendmail(from_email, [outgoing.to_email], outgoing.data)
            done_at.append(time.perf_counter())
            conn.quit()
        except (OSError, smtplib.SMTPException) as exc:
            errors.append(f"{from_email}: {exc!r}")

    threads = [threading.Thread(target=run, args=mailbox) for mailbox in mailboxes]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    return (max(done_at) - started if done_at else float("inf")), errors


def deliverability_on(account) -> None:
    """The blocklist and the recipient domain cap in the scheduler's path: 10,000
    entries (none names a contact, so every send is still made) and a cap on every
    campaign far above the run's sends, so each claim locks and counts its domain."""
    from outreach.models.blocklist import BlocklistEntry
    from outreach.models.campaigns import Campaign

    BlocklistEntry.objects.bulk_create(
        BlocklistEntry(account=account, value=f"blocked{n}.example", kind="domain")
        for n in range(10_000)
    )
    Campaign.objects.filter(account=account).update(max_per_recipient_domain_per_day=100_000)
    print("  deliverability on: 10,000 blocklist entries, a recipient domain cap of 100,000")


def run_point(args, mailboxes: int, port: int, sink_log: LineLog, workdir: Path) -> Point:
    from django.db.models import Count
    from django.utils import timezone

    from outreach.campaigns.dispatch import campaign_dispatch
    from outreach.models.campaigns import Campaign
    from outreach.models.mailboxes import SmtpCredential
    from outreach.models.sending import Enrollment

    per_mailbox = args.messages
    point = Point(
        mailboxes=mailboxes, messages=mailboxes * per_mailbox, through_api=args.through_api
    )
    account = account_create(f"{LABEL}-{mailboxes}", plan="scale")
    try:
        credential_pacing, campaign_pacing = pacing_off(SmtpCredential), pacing_off(Campaign)
        if credential_pacing or campaign_pacing:
            print(f"  pacing off: credential {credential_pacing}, campaign {campaign_pacing}")
        credentials = mailboxes_create(account, mailboxes, port=port, **credential_pacing)
        contacts = contacts_create(account, point.messages)
        if args.layout == "rotation":
            campaign = Campaign.objects.create(account=account, name="bench", **campaign_pacing)
            campaign.credentials.add(*credentials)
            step_create(campaign)
            campaigns = [campaign] * mailboxes
        else:
            campaigns = []
            for i, credential in enumerate(credentials):
                campaign = Campaign.objects.create(
                    account=account, name=f"bench {i}", **campaign_pacing
                )
                campaign.credentials.add(credential)
                step_create(campaign)
                campaigns.append(campaign)
        if args.deliverability:
            deliverability_on(account)
        Enrollment.objects.bulk_create(
            Enrollment(campaign=campaigns[n // per_mailbox], contact=contact)
            for n, contact in enumerate(contacts)
        )
        enrollments = list(
            Enrollment.objects.filter(campaign__account=account).select_related(
                "contact", "campaign"
            )
        )
        enrollments.sort(key=lambda e: int(e.contact.email_lower[1:].split("@")[0]))
        now = timezone.now()
        rendered = [
            (
                credential.from_email,
                messages_render(
                    enrollments[i * per_mailbox : (i + 1) * per_mailbox],
                    credential=credential,
                    now=now,
                ),
            )
            for i, credential in enumerate(credentials)
        ]

        point.baseline_seconds, point.baseline_errors = baseline(port, rendered)
        print(
            f"  baseline: {point.messages} messages in {point.baseline_seconds:.2f} s "
            f"({point.baseline_rate:.1f} msg/s)"
            + (f", {len(point.baseline_errors)} errors" if point.baseline_errors else "")
        )

        key = api_keys_create(account)[0] if args.through_api else ""
        broker_purge()
        senders = {c.from_email for c in credentials}
        workdir.mkdir(parents=True, exist_ok=True)
        with Service(workdir, service_env(), web=args.through_api) as service:
            service.start()
            if args.through_api:
                warm = web_warm(f"/campaigns/{campaigns[0].pk}", key=key)
                print(f"  web warmed: slowest GET of each round {_ms(warm)}")
            sink_log.skip()
            point.started = started = time.time()
            for campaign in dict.fromkeys(campaigns):
                if args.through_api:
                    status, answer = api_call(
                        "POST",
                        f"/campaigns/{campaign.pk}/dispatch",
                        key=key,
                        json_body={"all_pending": True},
                    )
                    if status != 200:
                        raise SystemExit(f"dispatch answered {status}: {answer}")
                else:
                    campaign_dispatch(campaign=campaign)
            point.dispatch_seconds = time.time() - started
            deadline = started + args.timeout
            while True:
                for line in sink_log.read():
                    at, mail_from, _rcpt = line.split(" ", 2)
                    if mail_from in senders:
                        point.accepted.append((float(at), mail_from))
                if point.complete:
                    point.waited = max(at for at, _ in point.accepted) - started
                    break
                if time.time() >= deadline or not service.alive():
                    point.waited = time.time() - started
                    if not service.alive():
                        print("  a service process exited early; see its log")
                    break
                time.sleep(0.05)
            # What the service had recorded when the measurement ended (before the stop).
            point.statuses = dict(
                Enrollment.objects.filter(campaign__account=account)
                .order_by()
                .values_list("status")
                .annotate(n=Count("id"))
            )
        point.stopped_cleanly = service.stopped_cleanly
        print(f"  logs: {workdir}")
        return point
    finally:
        account.delete()  # its campaigns, mailboxes, contacts, enrollments, messages
        broker_purge()


def report(point: Point) -> None:
    accepted = len(point.accepted)
    per_sender = Counter(sender for _, sender in point.accepted)
    times = sorted(at for at, _ in point.accepted)
    how = "POST /campaigns/:id/dispatch" if point.through_api else "campaign_dispatch"
    print(f"  dispatch call(s), {how}: {point.dispatch_seconds * 1000:.0f} ms")
    if times:
        print(
            f"  service: first message accepted +{times[0] - point.started:.1f} s, "
            f"{accepted} of {point.messages} accepted in {point.waited:.1f} s "
            f"({point.service_rate:.1f} msg/s)"
            + ("" if point.complete else " -- INCOMPLETE at the timeout")
        )
        print(
            f"  per mailbox: {min(per_sender.values(), default=0)}-"
            f"{max(per_sender.values(), default=0)} messages "
            f"({len(per_sender)} of {point.mailboxes} mailboxes sent)"
        )
    else:
        print(f"  service: nothing accepted in {point.waited:.1f} s")
    print(f"  enrollments when measured: {point.statuses}")
    print(f"  worker/beat stopped on SIGTERM: {point.stopped_cleanly}")
    print(
        f"  ratio service/baseline: {point.ratio:.3f} (goal >= {point.goal}: "
        f"{'met' if point.ratio >= point.goal else 'MISSED'})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mailboxes", default="100", help="N, or N1,N2,... for a curve")
    parser.add_argument("--messages", type=int, default=5, help="per mailbox")
    parser.add_argument("--reply-delay", type=float, default=0.05)
    parser.add_argument("--data-delay", type=float, default=0.2)
    parser.add_argument("--timeout", type=float, default=300, help="seconds per point")
    parser.add_argument("--layout", choices=("rotation", "per-mailbox"), default="rotation")
    parser.add_argument(
        "--deliverability",
        action="store_true",
        help="with a 10,000-entry blocklist and a recipient domain cap (docs/deliverability.md)",
    )
    parser.add_argument(
        "--through-api",
        action="store_true",
        help="the Procfile's web too; the dispatch through POST /campaigns/:id/dispatch",
    )
    args = parser.parse_args()
    sigterm_exits()
    prepare()
    accounts_purge()
    from tests.support.ports import free_port

    workdir = Path(tempfile.mkdtemp(prefix="bench-latency-sending-"))
    port = free_port()
    if args.through_api:
        web_bind()
    sink_log = LineLog(workdir / "sink.log")
    sink = smtp_sink_start(
        port=port, log=sink_log.path, reply_delay=args.reply_delay, data_delay=args.data_delay
    )
    print(
        f"SMTP sink: every reply +{args.reply_delay * 1000:.0f} ms, end of DATA "
        f"+{args.data_delay * 1000:.0f} ms; {args.messages} messages per mailbox; "
        f"layout {args.layout}; timeout {args.timeout:.0f} s per point; "
        f"dispatch {'through the API' if args.through_api else 'in process'}; "
        f"load {os.getloadavg()[0]:.2f} (1 min)"
    )
    if args.through_api:
        service_describe("BIND", web=True)
    else:
        service_describe()
    points = []
    try:
        for mailboxes in (int(n) for n in args.mailboxes.split(",")):
            print(f"\n{mailboxes} mailboxes x {args.messages} messages:")
            point = run_point(args, mailboxes, port, sink_log, workdir / f"n{mailboxes}")
            report(point)
            points.append(point)
    finally:
        process_stop(sink)
    print(f"\nmode: {MODE}, dispatch {'through the API' if args.through_api else 'in process'}")
    print("mailboxes  messages  baseline msg/s  service msg/s  ratio")
    for p in points:
        note = "" if p.complete else f"  (incomplete: {len(p.accepted)} in {p.waited:.0f} s)"
        print(
            f"{p.mailboxes:9d}  {p.messages:8d}  {p.baseline_rate:14.1f}  "
            f"{p.service_rate:13.1f}  {p.ratio:5.3f}{note}"
        )


if __name__ == "__main__":
    main()
