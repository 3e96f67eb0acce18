"""The scheduler over a fleet: campaigns of paced mailboxes of which nearly all wait on
their pace (bench/README.md, "The fleet at platform size"). A run claims one new thread
for each free mailbox, whatever the number of campaigns, in as few transactions as its
batch size allows, and the waiting mailboxes add no statement to it."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounts.models import Account
from outreach.models.campaigns import Campaign
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Enrollment, SendClaim
from outreach.sending.scheduler import schedule_due
from tests.outreach.factories import (
    CampaignFactory,
    ContactFactory,
    CredentialFactory,
    EnrollmentFactory,
)

NOW = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)  # a Monday


def _fleet(account: Account, campaigns: int, *, waiting: int = 2, threads: int = 3) -> list:
    """`campaigns` campaigns, each of one free paced mailbox and `waiting` paced ones
    whose next send is an hour ahead, each with `threads` due new threads, the first
    campaign's due first, then the second's, and so on. Returns the free mailboxes."""
    free = []
    for n in range(campaigns):
        campaign = CampaignFactory(
            account=account, status=Campaign.Status.ACTIVE, with_credential=False
        )
        mailboxes = [
            CredentialFactory(account=account, min_interval_seconds=100, max_interval_seconds=200)
            for _ in range(1 + waiting)
        ]
        SmtpCredential.objects.filter(pk__in=[m.pk for m in mailboxes[1:]]).update(
            next_send_earliest_at=NOW + timedelta(hours=1)
        )
        campaign.credentials.add(*mailboxes)
        free.append(mailboxes[0])
        for _ in range(threads):
            EnrollmentFactory(
                campaign=campaign,
                contact=ContactFactory(account=account),
                status=Enrollment.Status.SCHEDULED,
                next_send_at=NOW - timedelta(minutes=campaigns - n),
            )
    return free


@pytest.mark.django_db
def test_each_free_mailbox_of_many_campaigns_gets_a_thread_in_one_run(account, settings):
    # Six campaigns, one free mailbox each, and a run of two transactions of three rows:
    # taken in the due rows' order, each transaction read one campaign's three threads
    # and claimed one, and the run stopped after two claims.
    settings.SENDING_BATCH_SIZE = 3
    settings.SENDING_MAX_PER_TICK = 6
    free = _fleet(account, 6)

    batches = schedule_due(now=NOW)

    assert sorted(b.credential_id for b in batches) == sorted(m.pk for m in free)
    assert [b.size for b in batches] == [1] * 6
    # The waiting mailboxes got nothing, and one thread of each campaign is in flight.
    assert set(SendClaim.objects.values_list("credential_id", flat=True)) == {m.pk for m in free}
    assert SendClaim.objects.count() == 6


def _run() -> tuple[int, list]:
    """One scheduler run at NOW: (its statements, its batches)."""
    with CaptureQueriesContext(connection) as statements:
        batches = schedule_due(now=NOW)
    return len(statements.captured_queries), batches


@pytest.mark.django_db
def test_waiting_mailboxes_and_their_campaigns_add_no_statement_to_a_run(account, settings):
    # Transactions of ten rows: more than the free mailboxes, fewer than the due threads.
    settings.SENDING_BATCH_SIZE = 10
    first = _fleet(account, 2)
    statements, batches = _run()
    assert sorted(b.credential_id for b in batches) == sorted(m.pk for m in first)

    # Four times the campaigns, more waiting mailboxes in each, and the first fleet's
    # mailboxes waiting on their pace now too: the same statements (one claim
    # transaction), where the campaigns' due threads, read in order, made three.
    second = _fleet(account, 8, waiting=5)
    statements_then, batches = _run()
    assert sorted(b.credential_id for b in batches) == sorted(m.pk for m in second)
    assert statements_then == statements


def _entries_read(index: str) -> int:
    """Entries read from `index` in this transaction so far (the test's: its statistics are
    not flushed yet)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_get_xact_tuples_returned(%s::regclass)", [index])
        return cursor.fetchone()[0]


@pytest.mark.django_db
def test_a_dispatchs_first_run_reads_new_threads_only_as_far_as_its_batch(account, settings):
    # A dispatch of five campaigns of eight paced mailboxes, all free, none with a thread
    # yet, twelve due new threads each (the first campaign's due first), and a run of one
    # transaction of eight rows. Each campaign's eight first threads were read (each may
    # claim eight), 40 rows and their claim probes to keep eight: at a fleet's dispatch
    # (100 campaigns of 100) 10,000 rows a transaction (bench/README.md).
    settings.SENDING_BATCH_SIZE = 8
    settings.SENDING_MAX_PER_TICK = 8
    first = _fleet(account, 5, waiting=7, threads=12)
    SmtpCredential.objects.update(next_send_earliest_at=None)
    campaign_of = dict(
        Campaign.credentials.through.objects.values_list("smtpcredential_id", "campaign_id")
    )

    with connection.cursor() as cursor:
        # Statistics of this world, not of whatever an earlier test left when autovacuum
        # last looked (in a long run those made the planner take another index).
        cursor.execute("ANALYZE outreach_enrollment, outreach_smtpcredential, outreach_campaign")
        # A fleet's plan (index scans, in the index's order), which a table of a few rows
        # analyzed empty does not get: the planner then scans the table.
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_bitmapscan = off")
    before = _entries_read("enrollment_new_thread_idx")
    batches = schedule_due(now=NOW)
    read = _entries_read("enrollment_new_thread_idx") - before

    # The batch: the first campaign's, one thread for each of its eight mailboxes.
    assert {campaign_of[b.credential_id] for b in batches} == {campaign_of[first[0].pk]}
    assert [b.size for b in batches] == [1] * 8
    # Read: each campaign's first due thread (their order), the first campaign's eight
    # and the next campaign's first (where the first one's end is seen).
    assert 0 < read <= 5 + 8 + 1
