"""Shared set-up for the outreach benchmarks: Django against DATABASE_URL, migrated."""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
# Production mode wants these; a benchmark only needs them to be well-formed.
os.environ.setdefault("SECRET_KEY", "bench-only-secret-key-0000000000000000000000000000")
os.environ.setdefault("FIELD_ENCRYPTION_KEY", "YmVuY2gtb25seS1maWVsZC1rZXktMDAwMDAwMDAwMDA=")
os.environ.setdefault("CELERY_TASK_ALWAYS_EAGER", "true")
# Bench mailboxes are sinks without a login, sending far more than a person's mailbox.
os.environ.setdefault("SMTP_REQUIRE_LOGIN", "false")
os.environ.setdefault("DAILY_LIMIT_MAX", "1000000")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402


def prepare():
    if connection.vendor != "postgresql":
        print("note: DATABASE_URL is not PostgreSQL; the goals are stated for PostgreSQL.")
    call_command("migrate", verbosity=0)


def account_create(label: str, *, plan: str = "free"):
    from accounts.models import Account
    from plans.models import Plan

    return Account.objects.create(
        email=f"bench-{label}-{os.getpid()}@example.com", plan=Plan.objects.get(slug=plan)
    )


def account_drop(account) -> None:
    """Delete the bench rows fast (raw deletes, children first)."""
    from outreach.campaigns.models import Campaign
    from outreach.contacts.models import Contact, ContactImport
    from outreach.mailboxes.models import SmtpCredential
    from outreach.sending.models import Enrollment

    for queryset in (
        Enrollment.objects.filter(campaign__account=account),
        Contact.objects.filter(account=account),
        ContactImport.objects.filter(account=account),
    ):
        queryset._raw_delete(queryset.db)
    for model in (Campaign, SmtpCredential):
        model.objects.filter(account=account).delete()
    account.delete()


# The step the sending benchmarks send: text + HTML (with the open pixel), personalised.
STEP = {
    "subject": "Quick question, {{first_name|there}}",
    "body_text": "Hi {{first_name}},\n\nWould {{company}} like to talk?\n\nBench",
    "body_html": "<html><body><p>Hi {{first_name}},</p><p>{{company}}?</p></body></html>",
}


def step_create(campaign):
    """Step 1 of `campaign`: STEP, due at once."""
    from outreach.campaigns.models import CampaignStep

    return CampaignStep.objects.create(campaign=campaign, position=1, delay_minutes=0, **STEP)


def contacts_create(account, count: int, *, start: int = 0) -> list:
    """`count` personalised contacts r<n>@bench.example, n from `start`."""
    from outreach.contacts.models import Contact

    return Contact.objects.bulk_create(
        [
            Contact(
                account=account,
                email=f"r{i}@bench.example",
                email_lower=f"r{i}@bench.example",
                first_name=f"Name{i}",
                company="Acme",
            )
            for i in range(start, start + count)
        ]
    )


def messages_render(enrollments, *, credential, now) -> list:
    """Step 1 of each enrollment's campaign, rendered by the service's own message_build
    as `credential` would send it: the baseline's pre-rendered messages (Outgoing:
    .to_email, .data)."""
    from outreach.sending.message import message_build

    steps: dict = {}
    rendered = []
    for enrollment in enrollments:
        campaign = enrollment.campaign
        if campaign.pk not in steps:
            steps[campaign.pk] = campaign.steps.get(position=1)
        rendered.append(
            message_build(
                credential=credential,
                campaign=campaign,
                step=steps[campaign.pk],
                enrollment=enrollment,
                thread=[],
                first_subject="",
                now=now,
            )
        )
    return rendered
