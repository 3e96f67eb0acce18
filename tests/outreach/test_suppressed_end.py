"""The scheduler's sweep of suppressed contacts (outreach.sending.recovery.suppressed_end)
reads what was suppressed since its last look, not the due backlog, and still ends every
due enrollment of a suppressed contact: one suppressed while its enrollment was in flight
once the claim is given back, one whose next step was days ahead once it is due, one whose
suppression committed after a later look started (the margin), and, with no mark, every
one (its first run)."""

import ast
import json
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from outreach import enrollments
from outreach.intake.services import contact_unsubscribe
from outreach.models.contacts import Contact
from outreach.models.sending import Enrollment, SendClaim
from outreach.models.sweeps import SuppressedWatch, SweepMark
from outreach.sending.bounces import enrollment_mark_bounced
from outreach.sending.record import claim_release
from outreach.sending.recovery import (
    SUPPRESSED_BOUNCE_REASON,
    SUPPRESSED_LOOK_MARGIN,
    SUPPRESSED_SWEEP,
    suppressed_end,
)
from tests.outreach.factories import CampaignFactory, ContactFactory, EnrollmentFactory

pytestmark = pytest.mark.django_db

Status = Enrollment.Status


def _due(campaign, contact, *, at=None):
    return EnrollmentFactory(
        campaign=campaign,
        contact=contact,
        status=Status.SCHEDULED,
        next_send_at=at or timezone.now() - timedelta(minutes=1),
    )


def _bounced_elsewhere(account, contact):
    """The contact's enrollment in another campaign hard-bounces: the contact is suppressed,
    its other enrollments are left to the sweep."""
    other = CampaignFactory(account=account, status="active")
    enrollment = _due(other, contact)
    assert enrollment_mark_bounced(enrollment=enrollment, reason="550 5.1.1 no such user")


def _long_ago(contact) -> None:
    """Its row last written a day ago, the mark since: no later look's window reaches it."""
    Contact.objects.filter(pk=contact.pk).update(updated_at=timezone.now() - timedelta(days=1))
    SweepMark.objects.update_or_create(
        name=SUPPRESSED_SWEEP, defaults={"at": timezone.now() - timedelta(seconds=1)}
    )


def _watched() -> set:
    return set(SuppressedWatch.objects.values_list("contact_id", flat=True))


def test_a_contact_suppressed_while_its_enrollment_was_in_flight_ends_once_the_claim_is_given_back(
    account,
):
    campaign = CampaignFactory(account=account, status="active")
    contact = ContactFactory(account=account)
    enrollment = _due(campaign, contact)
    now = timezone.now()
    claim = SendClaim.objects.create(
        enrollment=enrollment,
        batch_id=uuid.uuid4(),
        credential=campaign.credentials.get(),
        step=1,
        claimed_at=now,
        lease_until=now + timedelta(minutes=15),
    )
    _bounced_elsewhere(account, contact)

    assert suppressed_end(now=timezone.now()) == 0  # in flight: its sender decides
    assert _watched() == {contact.pk}
    _long_ago(contact)
    assert suppressed_end(now=timezone.now()) == 0  # still in flight
    # The sender found the contact suppressed and gave the claim back.
    claim_release(claim, now=timezone.now(), next_send_at=None)
    assert suppressed_end(now=timezone.now()) == 1

    enrollment.refresh_from_db()
    assert (enrollment.status, enrollment.bounce_reason) == (
        Status.BOUNCED,
        SUPPRESSED_BOUNCE_REASON,
    )
    assert enrollments.stats_check(campaign_id=campaign.pk) == {}
    suppressed_end(now=timezone.now())
    assert _watched() == set()  # nothing left to end: forgotten


def test_a_contact_suppressed_before_its_next_step_ends_when_the_step_is_due(account):
    campaign = CampaignFactory(account=account, status="active")
    contact = ContactFactory(account=account)
    later = timezone.now() + timedelta(days=3)
    enrollment = _due(campaign, contact, at=later)
    _bounced_elsewhere(account, contact)

    assert suppressed_end(now=timezone.now()) == 0
    _long_ago(contact)
    assert suppressed_end(now=later - timedelta(seconds=1)) == 0
    assert suppressed_end(now=later) == 1
    enrollment.refresh_from_db()
    assert enrollment.status == Status.BOUNCED


def test_a_suppression_committed_after_a_later_look_started_is_found(account):
    """Written at T, committed at T + 5 s: the look that started at T + 1 s did not see it;
    the next one reads from its start less the margin."""
    campaign = CampaignFactory(account=account, status="active")
    contact = ContactFactory(account=account)
    enrollment = _due(campaign, contact)
    written = timezone.now() - timedelta(seconds=5)
    SweepMark.objects.create(name=SUPPRESSED_SWEEP, at=written + timedelta(seconds=1))
    Contact.objects.filter(pk=contact.pk).update(bounced_at=written, updated_at=written)
    assert timedelta(seconds=5) <= SUPPRESSED_LOOK_MARGIN

    assert suppressed_end(now=timezone.now()) == 1
    enrollment.refresh_from_db()
    assert enrollment.status == Status.BOUNCED


def test_a_bounce_reported_with_an_old_time_is_found_by_the_next_look(account):
    """The suppression's own time is the event's (here three days old); the row's write
    time is what the look reads."""
    campaign = CampaignFactory(account=account, status="active")
    contact = ContactFactory(account=account)
    enrollment = _due(campaign, contact)
    other = _due(CampaignFactory(account=account, status="active"), contact)
    assert suppressed_end(now=timezone.now()) == 0  # the mark is now
    assert enrollment_mark_bounced(
        enrollment=other, reason="550 no such user", at=timezone.now() - timedelta(days=3)
    )

    assert suppressed_end(now=timezone.now()) == 1
    enrollment.refresh_from_db()
    assert enrollment.status == Status.BOUNCED


def test_an_unsubscribe_stamps_the_rows_write_time_not_the_replys(account):
    contact = ContactFactory(account=account)
    received = timezone.now() - timedelta(hours=6)
    before = timezone.now()
    contact_unsubscribe(contact_id=contact.pk, at=received)
    contact.refresh_from_db()
    assert contact.unsubscribed_at == received
    assert contact.updated_at >= before


def test_with_no_mark_the_first_look_reads_every_suppressed_contact(account):
    campaign = CampaignFactory(account=account, status="active")
    contact = ContactFactory(account=account)
    enrollment = _due(campaign, contact)
    month_ago = timezone.now() - timedelta(days=30)
    Contact.objects.filter(pk=contact.pk).update(unsubscribed_at=month_ago, updated_at=month_ago)
    assert not SweepMark.objects.exists()

    assert suppressed_end(now=timezone.now()) == 1
    enrollment.refresh_from_db()
    assert (enrollment.status, enrollment.unsubscribed_at) == (Status.UNSUBSCRIBED, month_ago)
    assert SweepMark.objects.get(name=SUPPRESSED_SWEEP).at > month_ago


def test_a_quiet_run_is_one_statement_that_reads_the_enrollments_of_the_contacts_looked_at(
    account,
):
    """The shape that keeps a run's cost to the suppressions: the due backlog is never
    scanned; each contact looked at (suppressed since the last look, or watched) is
    probed for its enrollments through enrollment_unique, and the suppressed contacts
    written since the mark come from their partial index."""
    campaign = CampaignFactory(account=account, status="active")
    for _ in range(20):  # the backlog: due, nobody suppressed
        _due(campaign, ContactFactory(account=account))
    watched = ContactFactory(account=account)
    _due(campaign, watched, at=timezone.now() + timedelta(days=2))
    _bounced_elsewhere(account, watched)
    assert suppressed_end(now=timezone.now()) == 0
    assert _watched() == {watched.pk}
    _long_ago(watched)

    mark = SweepMark.objects.get().at
    with CaptureQueriesContext(connection) as queries:
        assert suppressed_end(now=timezone.now()) == 0
    [statement] = queries.captured_queries
    assert SweepMark.objects.get().at == mark  # less than a step behind: not written
    with connection.cursor() as cursor:
        # Statistics of this world, not of whatever an earlier test left when autovacuum
        # last looked (in a long run those made the planner probe another index).
        cursor.execute("ANALYZE outreach_enrollment, outreach_contact, outreach_sendclaim")
        # The tables are a few pages: without this their scans cost least, whatever
        # the shape. The shape is what is asserted: where the plan may read per contact.
        cursor.execute("SET LOCAL enable_seqscan = off")
        # A bitmap over the same index reads the same entries; the probe's node is what
        # is counted below, so the plain index scan is the one asked for.
        cursor.execute("SET LOCAL enable_bitmapscan = off")
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + statement["sql"])
        plan = cursor.fetchone()[0]
    nodes = list(_nodes(plan[0]["Plan"] if isinstance(plan, list) else json.loads(plan)))
    enrollment_reads = {
        (n["Node Type"], n.get("Index Name"))
        for n in nodes
        if n.get("Relation Name") == "outreach_enrollment"
    }
    assert enrollment_reads == {("Index Scan", "enrollment_unique")}
    assert "contact_suppressed_written_idx" in {n.get("Index Name") for n in nodes}
    [probe] = [n for n in nodes if n.get("Relation Name") == "outreach_enrollment"]
    # Once per contact looked at (the watched one): its two enrollments, not the backlog.
    assert probe["Actual Loops"] == 1
    assert probe["Actual Rows"] + probe.get("Rows Removed by Filter", 0) == 2


def _nodes(node):
    yield node
    for child in node.get("Plans", []):
        yield from _nodes(child)


def _contact_suppressions(source: str) -> list[tuple[int, str]]:
    """Each `Contact.objects....update(...)` that sets unsubscribed_at or bounced_at: its
    line and what it sets updated_at to ("" when it does not)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr != "update" or "Contact.objects" not in ast.unparse(node.func.value):
            continue
        names = {k.arg: ast.unparse(k.value) for k in node.keywords if k.arg}
        if {"unsubscribed_at", "bounced_at"} & set(names):
            found.append((node.lineno, names.get("updated_at", "")))
    return found


def test_every_write_that_suppresses_a_contact_stamps_its_write_time():
    """The sweep finds a suppression by the row's updated_at: a write that suppresses a
    contact without stamping the wall clock there would be missed (Contact.save() and
    config.db.rows.row_change stamp it themselves)."""
    root = Path(__file__).resolve().parents[2] / "outreach"
    writes = {
        f"{path.relative_to(root)}:{line}": stamp
        for path in root.rglob("*.py")
        if "migrations" not in path.parts
        for line, stamp in _contact_suppressions(path.read_text())
    }
    assert len(writes) >= 2  # the bounce and the unsubscribe
    assert {where: stamp for where, stamp in writes.items() if stamp != "timezone.now()"} == {}


def test_the_scan_finds_a_suppression_without_its_stamp():
    source = """
Contact.objects.filter(pk=pk).update(bounced_at=at, updated_at=at)
Contact.objects.filter(pk=pk).update(unsubscribed_at=at)
Contact.objects.filter(pk=pk).update(bounced_at=at, updated_at=timezone.now())
Enrollment.objects.filter(pk=pk).update(unsubscribed_at=at)
"""
    assert _contact_suppressions(source) == [(2, "at"), (3, ""), (4, "timezone.now()")]
