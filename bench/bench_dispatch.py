"""Dispatch of a campaign to 100,000 pending enrollments (POST /campaigns/:id/dispatch
with all_pending, through the service it calls).

    DATABASE_URL=postgres://... REDIS_URL=... .venv/bin/python bench/bench_dispatch.py [n]

Goal: under 10 seconds on PostgreSQL. Baseline for scale, same run: a bare
`UPDATE ... SET status = 'scheduled'` of the same rows.
"""

import sys
import time

from _setup import account_create, account_drop, prepare

prepare()

from django.db import connection  # noqa: E402

from outreach.campaigns import dispatch  # noqa: E402
from outreach.campaigns.models import Campaign, CampaignStep  # noqa: E402
from outreach.contacts.models import Contact  # noqa: E402
from outreach.mailboxes.models import SmtpCredential  # noqa: E402
from outreach.sending.models import Enrollment  # noqa: E402

N = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000


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


def main():
    account = account_create("dispatch")
    try:
        campaign = setup_campaign(account)
        started = time.perf_counter()
        dispatched = dispatch.campaign_dispatch(campaign=campaign)
        seconds = time.perf_counter() - started
        assert dispatched == N, dispatched
        assert Enrollment.objects.filter(campaign=campaign, status="scheduled").count() == N

        # Baseline: the same rows back to pending, then one bare UPDATE.
        Enrollment.objects.filter(campaign=campaign).update(status="pending", next_send_at=None)
        started = time.perf_counter()
        Enrollment.objects.filter(campaign=campaign, status="pending").update(status="scheduled")
        bare = time.perf_counter() - started
    finally:
        account_drop(account)
    print(f"enrollments: {N}")
    print(
        f"dispatch (all_pending): {seconds:.2f} s ({N / seconds:,.0f} enrollments/s) (goal < 10 s)"
    )
    print(f"bare UPDATE of the same rows: {bare:.2f} s")


if __name__ == "__main__":
    main()
