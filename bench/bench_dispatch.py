"""Dispatch of a campaign to 100,000 pending enrollments (POST /campaigns/:id/dispatch
with all_pending), against a bare UPDATE of the same rows in the same run.

    DATABASE_URL=postgres://... REDIS_URL=... .venv/bin/python bench/bench_dispatch.py [n]
      (in process: the service the endpoint calls, campaign_dispatch)
    DATABASE_URL=postgres://... REDIS_URL=... .venv/bin/python bench/bench_dispatch.py [n] \\
      --through-api
      (from outside: the whole Procfile started as bench/_peers.py's Service(web=True)
      does, and the dispatch is `POST /campaigns/:id/dispatch` with an API key against
      its web server; the clock runs from the request to its answer)

Goals: under 10 seconds on PostgreSQL; through the API, at least 0.9 of the bare
UPDATE's speed (its seconds / the dispatch's). The baseline, same run, after the
dispatch: the same rows back to pending, then one bare
`UPDATE ... SET status = 'scheduled'` (in process; the service stopped first).
"""

import argparse
import os
import tempfile
import time
from pathlib import Path

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("n", nargs="?", type=int, default=100_000, help="enrollments")
parser.add_argument(
    "--through-api",
    action="store_true",
    help="dispatch through POST /campaigns/:id/dispatch on the Procfile's web",
)
ARGS = parser.parse_args()
N = ARGS.n
GOAL_SECONDS = 10.0
GOAL_RATIO_API = 0.9

if ARGS.through_api:
    from _peers import (
        Service,
        api_call,
        broker_purge,
        mode_environment,
        service_describe,
        service_env,
        sigterm_exits,
        web_bind,
        web_warm,
    )

    MODE = mode_environment("dispatch")

from _setup import account_create, account_drop, api_keys_create, prepare  # noqa: E402

prepare()

from django.db import connection  # noqa: E402

from outreach.campaigns import dispatch  # noqa: E402
from outreach.models.campaigns import Campaign, CampaignStep  # noqa: E402
from outreach.models.contacts import Contact  # noqa: E402
from outreach.models.mailboxes import SmtpCredential  # noqa: E402
from outreach.models.sending import Enrollment  # noqa: E402


def setup_campaign(account) -> Campaign:
    campaign = Campaign.objects.create(
        account=account,
        name="bench",
        timezone="America/New_York",
        send_window={"start": "09:00", "end": "17:00", "days": [1, 2, 3, 4, 5]},
    )
    CampaignStep.objects.create(
        campaign=campaign, position=1, subject="Hi {{first_name}}", body_text="x", delay_minutes=5
    )
    campaign.credentials.add(
        SmtpCredential.objects.create(account=account, from_email="b@example.com", smtp_host="h")
    )
    contacts = [
        Contact(account=account, email=f"p{i}@example.org", email_lower=f"p{i}@example.org")
        for i in range(N)
    ]
    Contact.objects.bulk_create(contacts, batch_size=5000)
    Enrollment.objects.bulk_create(
        [Enrollment(campaign=campaign, contact=c) for c in contacts], batch_size=5000
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE outreach_enrollment")
        cursor.execute("ANALYZE outreach_contact")
    return campaign


def dispatch_in_process(campaign) -> float:
    started = time.perf_counter()
    dispatched = dispatch.campaign_dispatch(campaign=campaign)
    seconds = time.perf_counter() - started
    assert dispatched == N, dispatched
    return seconds


def dispatch_through_api(campaign, key: str) -> float:
    """The whole Procfile (web, worker, webhooks, beat), then the dispatch request; the
    service is stopped before this returns."""
    workdir = Path(tempfile.mkdtemp(prefix="bench-dispatch-"))
    broker_purge()
    connection.close()  # the bench database's connections are the service's alone
    with Service(workdir, service_env(), web=True) as service:
        service.start()
        warm = web_warm(f"/campaigns/{campaign.pk}", key=key)
        print(f"  web warmed: slowest GET of each round {', '.join(f'{s:.3f} s' for s in warm)}")
        started = time.perf_counter()
        status, answer = api_call(
            "POST", f"/campaigns/{campaign.pk}/dispatch", key=key, json_body={"all_pending": True}
        )
        seconds = time.perf_counter() - started
    print(f"  service logs: {workdir}")
    assert status == 200, (status, answer)
    assert answer["dispatched"] == N, answer
    return seconds


def main():
    if ARGS.through_api:
        sigterm_exits()
        web_bind()
        print(f"through the API (mode {MODE}):")
        service_describe("BIND", web=True)
    account = account_create("dispatch", plan="scale" if ARGS.through_api else "free")
    try:
        campaign = setup_campaign(account)
        if ARGS.through_api:
            (key,) = api_keys_create(account)
            seconds = dispatch_through_api(campaign, key)
        else:
            seconds = dispatch_in_process(campaign)
        assert Enrollment.objects.filter(campaign=campaign, status="scheduled").count() == N

        # Baseline: the same rows back to pending, then one bare UPDATE.
        Enrollment.objects.filter(campaign=campaign).update(status="pending", next_send_at=None)
        started = time.perf_counter()
        Enrollment.objects.filter(campaign=campaign, status="pending").update(status="scheduled")
        bare = time.perf_counter() - started
    finally:
        account_drop(account)
    where = "POST /campaigns/:id/dispatch" if ARGS.through_api else "campaign_dispatch"
    print(f"enrollments: {N}; load {os.getloadavg()[0]:.2f} (1 min) at the end")
    print(
        f"dispatch (all_pending, {where}): {seconds:.2f} s ({N / seconds:,.0f} enrollments/s) "
        f"(goal < {GOAL_SECONDS:.0f} s: {'met' if seconds < GOAL_SECONDS else 'MISSED'})"
    )
    print(f"bare UPDATE of the same rows: {bare:.2f} s")
    ratio = bare / seconds
    if ARGS.through_api:
        verdict = "met" if ratio >= GOAL_RATIO_API else "MISSED"
        print(f"ratio bare UPDATE / dispatch: {ratio:.3f} (goal >= {GOAL_RATIO_API}: {verdict})")
    else:
        print(f"ratio bare UPDATE / dispatch: {ratio:.3f}")


if __name__ == "__main__":
    main()
