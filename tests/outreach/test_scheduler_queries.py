"""What a scheduler run costs in queries: its decisions about the mailboxes (the rules
of outreach.mailboxes.blockers) read nothing of their own, so a run's queries do not
grow with the campaign's mailboxes, whatever holds them."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from outreach.models.campaigns import Campaign
from outreach.models.domains import SenderDomainCheck
from outreach.models.mailboxes import SmtpCredential
from outreach.sending.scheduler import schedule_due
from tests.outreach.factories import (
    CampaignFactory,
    ContactFactory,
    CredentialFactory,
    EnrollmentFactory,
)

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)  # a Monday

# One run over the campaign below: recovery, suppressed ends, branch deadlines, the busy
# mailboxes, the run's view, and its claim transactions' reads and writes. The same
# before the rules were one function (outreach.mailboxes.blockers) as after; one more
# since the scan reads each campaign's new threads as far as its free mailboxes can claim
# (the campaigns each free mailbox serves).
RUN_QUERIES = 30


def _mailboxes(campaign, count: int) -> None:
    """`count` mailboxes in each state the rules read: free, paced, disabled, paused by
    the complaint guard, to connect again, unauthenticated, with its day full."""
    account = campaign.account
    for _ in range(count):
        free = CredentialFactory(account=account)
        paced = CredentialFactory(
            account=account,
            min_interval_seconds=60,
            max_interval_seconds=120,
            next_send_earliest_at=NOW + timedelta(minutes=1),
        )
        disabled = CredentialFactory(account=account, disabled_at=NOW)
        complaints = CredentialFactory(account=account, paused_at=NOW)
        revoked = CredentialFactory(
            account=account, auth_method="oauth_google", oauth_status="reauthorization_required"
        )
        unauthenticated = CredentialFactory(account=account)
        SenderDomainCheck.objects.create(
            credential=unauthenticated, domain="example.com", status="error", checked_at=NOW
        )
        full = CredentialFactory(
            account=account, daily_limit=1, daily_sent_count=1, daily_sent_on=NOW.date()
        )
        campaign.credentials.add(free, paced, disabled, complaints, revoked, unauthenticated, full)


def _run_queries(count: int) -> tuple[int, int]:
    campaign = CampaignFactory(
        status=Campaign.Status.ACTIVE,
        with_credential=False,
        require_authenticated_domain=True,
        max_per_recipient_domain_per_day=5,
    )
    _mailboxes(campaign, count)
    for n in range(8):
        contact = ContactFactory(account=campaign.account, email=f"c{n}@acme{n % 2}.example")
        EnrollmentFactory(campaign=campaign, contact=contact, status="scheduled", next_send_at=NOW)
    with CaptureQueriesContext(connection) as queries:
        batches = schedule_due(now=NOW)
    return len(queries.captured_queries), sum(b.size for b in batches)


def test_a_runs_queries_do_not_grow_with_the_mailboxes_or_what_holds_them():
    few, claimed_few = _run_queries(1)
    SmtpCredential.objects.all().delete()
    many, claimed_many = _run_queries(6)
    # Each free mailbox takes its share of the run's new threads (_RunView.share).
    assert (claimed_few, claimed_many) == (2, 6)
    assert (few, many) == (RUN_QUERIES, RUN_QUERIES)


def test_a_run_reads_no_secret_of_the_mailboxes_it_locks():
    """The scheduler decides with the mailboxes' counters and pace; their passwords and
    tokens stay in the database, neither sent to the worker nor decrypted there."""
    campaign = CampaignFactory(status=Campaign.Status.ACTIVE, with_credential=False)
    campaign.credentials.add(
        CredentialFactory(account=campaign.account, smtp_password="hunter2", imap_password="pw")
    )
    EnrollmentFactory(campaign=campaign, status="scheduled", next_send_at=NOW)
    with CaptureQueriesContext(connection) as queries:
        batches = schedule_due(now=NOW)
    assert sum(b.size for b in batches) == 1
    secrets = [
        f.column
        for f in SmtpCredential._meta.concrete_fields
        if "EncryptedText" in type(f).__name__
    ]
    assert {"smtp_password", "imap_password", "oauth_access_token"} <= set(secrets)
    read = [q["sql"] for q in queries.captured_queries if "outreach_smtpcredential" in q["sql"]]
    assert read, "the run locks its mailbox"
    assert not [sql for sql in read for column in secrets if f'"{column}"' in sql]
