"""Shared set-up for the outreach benchmarks: Django against DATABASE_URL, or without
it against the embedded mode's PostgreSQL of VAR_DIR (started by `prepare`), migrated."""

import atexit
import os
import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
if os.environ.get("DATABASE_URL"):
    # Production mode wants these; a benchmark only needs them to be well-formed. (The
    # embedded mode generates its own in VAR_DIR, which its other processes read too.)
    os.environ.setdefault("SECRET_KEY", "bench-only-secret-key-0000000000000000000000000000")
    os.environ.setdefault("FIELD_ENCRYPTION_KEY", "YmVuY2gtb25seS1maWVsZC1rZXktMDAwMDAwMDAwMDA=")
os.environ.setdefault("CELERY_TASK_ALWAYS_EAGER", "true")
# Bench mailboxes are sinks without a login, sending far more than a person's mailbox.
os.environ.setdefault("SMTP_REQUIRE_LOGIN", "false")
os.environ.setdefault("DAILY_LIMIT_MAX", "1000000")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402


def prepare():
    """Migrate; in the embedded mode, start its PostgreSQL first (as manage.py does) and
    stop it when this process exits, if this started it. The service's processes,
    started later with the same VAR_DIR, find it running."""
    from django.conf import settings

    if settings.EMBEDDED:
        from config import embedded_db

        data = settings.EMBEDDED_DATABASE_DIR
        if embedded_db.server_start(data):
            atexit.register(embedded_db.server_stop, data)
        embedded_db.settings_refresh(settings.DATABASES["default"], data)
    call_command("migrate", verbosity=0)


def account_create(label: str, *, plan: str = "free"):
    from accounts.models import Account
    from plans.models import Plan

    return Account.objects.create(
        email=f"bench-{label}-{os.getpid()}@example.com", plan=Plan.objects.get(slug=plan)
    )


def api_keys_create(account, count: int = 1) -> list[str]:
    """`count` API keys of `account` (plaintexts), its signup address verified first: the
    API's writes (dispatch, imports) require it. Each key has its own rate limit (60
    requests a minute)."""
    from django.utils import timezone

    from accounts.services import api_key_create

    account.email_verified_at = timezone.now()
    account.save(update_fields=["email_verified_at"])
    return [api_key_create(account=account, label=f"bench {n}").plaintext for n in range(count)]


def account_drop(account) -> None:
    """Delete the bench rows fast (raw deletes, children first)."""
    from django.db import connection

    from outreach.models.campaigns import Campaign
    from outreach.models.contacts import Contact, ContactImport
    from outreach.models.mailboxes import SmtpCredential
    from outreach.models.sending import Enrollment, Message, SendClaim

    # Statistics first: taken after a setup (claims and messages none yet), they made the
    # claims' DELETE a nested loop over every claim per claim (minutes at 10,000).
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE outreach_sendclaim, outreach_message, outreach_enrollment")
    for queryset in (
        SendClaim.objects.filter(enrollment__campaign__account=account),
        Message.objects.filter(enrollment__campaign__account=account),
        Enrollment.objects.filter(campaign__account=account),
        Contact.objects.filter(account=account),
        ContactImport.objects.filter(account=account),
    ):
        queryset._raw_delete(queryset.db)
    for model in (Campaign, SmtpCredential):
        model.objects.filter(account=account).delete()
    account.delete()


def mailboxes_create(account, count: int, *, port: int, **pace) -> list:
    """`count` mailboxes of `account` on the sink at 127.0.0.1:`port` (no TLS, no login),
    mailbox<i>@sender<i>.example, a daily limit no run reaches; `pace` sets their
    min/max_interval_seconds (or whatever pacing fields a benchmark turns off)."""
    from outreach.models.mailboxes import SmtpCredential

    return SmtpCredential.objects.bulk_create(
        SmtpCredential(
            account=account,
            from_email=f"mailbox{i}@sender{i}.example",
            from_name=f"Mailbox {i}",
            smtp_host="127.0.0.1",
            smtp_port=port,
            smtp_security="none",
            daily_limit=100_000,
            **pace,
        )
        for i in range(count)
    )


# The step the sending benchmarks send: text + HTML (with the open pixel), personalised.
STEP = {
    "subject": "Quick question, {{first_name|there}}",
    "body_text": "Hi {{first_name}},\n\nWould {{company}} like to talk?\n\nBench",
    "body_html": "<html><body><p>Hi {{first_name}},</p><p>{{company}}?</p></body></html>",
}


def step_create(campaign):
    """Step 1 of `campaign`: STEP, due at once."""
    from outreach.models.campaigns import CampaignStep

    return CampaignStep.objects.create(campaign=campaign, position=1, delay_minutes=0, **STEP)


def contacts_create(account, count: int, *, start: int = 0) -> list:
    """`count` personalised contacts r<n>@bench.example, n from `start`."""
    from outreach.models.contacts import Contact

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


def sent_create(campaign, contacts, *, credential, at, subject: str = "Hello") -> tuple:
    """One enrollment of `campaign` per contact whose step 1 `credential` sent at `at`
    (status sent, the next step three days later), and the Message row the sending
    engine records for each: (enrollments, messages), in the contacts' order."""
    from datetime import timedelta

    from outreach.models.sending import Enrollment, Message

    enrollments = Enrollment.objects.bulk_create(
        Enrollment(
            campaign=campaign,
            contact=contact,
            status="sent",
            current_step=1,
            credential=credential,
            sent_at=at,
            next_send_at=at + timedelta(days=3),
        )
        for contact in contacts
    )
    messages = Message.objects.bulk_create(
        Message(
            account_id=campaign.account_id,
            enrollment=enrollment,
            credential=credential,
            step=1,
            message_id=f"{uuid.uuid4().hex}@{credential.from_email.partition('@')[2]}",
            to_email=contact.email,
            subject=subject,
            sent_at=at,
        )
        for enrollment, contact in zip(enrollments, contacts, strict=True)
    )
    return enrollments, messages


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
