"""The blocklist: `/blocklist` (bulk add, filters, delete, CSV), and where it applies:
contact imports and outreaches skip a blocked address, dispatch stops a blocked pending
enrollment, and the send scheduler stops a due one before its next step (a real SMTP
server receives what is sent)."""

import csv
import io
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from config.api.csv_export import csv_cell, csv_cell_read
from outreach.blocklist.entries import address_keys
from outreach.models.blocklist import BlocklistEntry
from outreach.models.campaigns import Campaign
from outreach.models.contacts import Contact
from outreach.models.sending import Enrollment, Message
from outreach.sending.scheduler import schedule_due
from outreach.sending.send import batch_send
from tests.outreach.factories import (
    CampaignFactory,
    ContactFactory,
    CredentialFactory,
    EnrollmentFactory,
)
from tests.outreach.helpers import assert_error, assert_fields

pytestmark = pytest.mark.django_db

# A Monday, 10:00 UTC.
NOW = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)


def add(client, entries, **extra):
    return client.post("/blocklist", {"entries": entries, **extra}, format="json")


# --- the API ------------------------------------------------------------------------------


def test_adding_entries_answers_added_existing_and_invalid(api_client, account):
    add(api_client, ["known@example.com"])
    response = add(
        api_client,
        [
            "Ada@Example.COM",
            "competitor.com",
            "@rival.io",
            "known@example.com",
            "COMPETITOR.com",
            "not an entry",
            "localhost",
            "",
            42,
        ],
        reason="asked not to be contacted",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["added"] == 3
    assert body["existing"] == 2  # already there, and a repeat within the call
    assert [item["value"] for item in body["invalid"]] == ["not an entry", "localhost", "", "42"]
    assert all(item["message"] for item in body["invalid"])
    stored = dict(BlocklistEntry.objects.filter(account=account).values_list("value", "kind"))
    assert stored == {
        "known@example.com": "email",
        "ada@example.com": "email",
        "competitor.com": "domain",
        "rival.io": "domain",
    }
    listed = api_client.get("/blocklist").json()
    assert listed[0].keys() == {"id", "value", "kind", "created_at", "reason"}
    reasons = {entry["value"]: entry["reason"] for entry in listed}
    assert reasons["competitor.com"] == "asked not to be contacted"
    assert reasons["known@example.com"] is None
    assert listed[0]["created_at"].endswith("Z")


def test_an_internationalised_domain_is_one_entry_in_either_form(api_client, account):
    add(api_client, ["bücher.example"])
    body = add(api_client, ["xn--bcher-kva.example", "Jörg@BÜCHER.example"]).json()
    assert (body["added"], body["existing"]) == (1, 1)
    assert set(BlocklistEntry.objects.values_list("value", flat=True)) == {
        "bücher.example",
        "jörg@bücher.example",
    }


def test_ten_thousand_entries_in_one_call(api_client, account, django_assert_max_num_queries):
    values = [f"company{n}.example" for n in range(10_000)]
    # Authentication and rate limit, then the inserts (2,000 a statement) and one count.
    with django_assert_max_num_queries(16):
        response = add(api_client, values)
    assert response.status_code == 201
    assert response.json() == {"added": 10_000, "existing": 0, "invalid": []}
    assert BlocklistEntry.objects.filter(account=account).count() == 10_000


def test_more_than_ten_thousand_is_refused_and_nothing_is_written(api_client):
    response = add(api_client, [f"c{n}.example" for n in range(10_001)])
    fields = assert_fields(response, "entries")
    assert "10,000" in fields["entries"][0]
    assert not BlocklistEntry.objects.exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "entries"),
        ({"entries": []}, "entries"),
        ({"entries": "a@b.com"}, "entries"),
        ({"entries": ["a@b.com"], "reason": "x" * 201}, "reason"),
    ],
)
def test_a_malformed_body_is_refused(api_client, body, field):
    assert_fields(api_client.post("/blocklist", body, format="json"), field)
    assert not BlocklistEntry.objects.exists()


def test_the_list_filters_by_kind_and_value_and_pages(api_client, django_assert_max_num_queries):
    add(api_client, ["a@one.example", "two.example", "b@three.example", "Four.example"])
    with django_assert_max_num_queries(4):
        emails = api_client.get("/blocklist?kind=email").json()
    assert {e["value"] for e in emails} == {"a@one.example", "b@three.example"}
    found = api_client.get("/blocklist?value=FOUR.example").json()
    assert [e["value"] for e in found] == ["four.example"]
    assert api_client.get("/blocklist?value=nothing here").json() == []
    first = api_client.get("/blocklist?limit=3")
    assert len(first.json()) == 3 and 'rel="next"' in first["Link"]
    rest = api_client.get(f"/blocklist?limit=3&starting_after={first.json()[-1]['id']}")
    assert len(rest.json()) == 1 and "Link" not in rest
    assert_fields(api_client.get("/blocklist?kind=person"), "kind")


def test_delete_and_account_isolation(api_client, other_client):
    add(api_client, ["gone.example", "kept.example"])
    entry = BlocklistEntry.objects.get(value="gone.example")
    assert_error(other_client.delete(f"/blocklist/{entry.pk}"), 404, "blocklist_entry_not_found")
    assert other_client.get("/blocklist").json() == []
    assert _csv(other_client.get("/blocklist.csv")) == [["value", "kind", "reason", "created_at"]]
    assert api_client.delete(f"/blocklist/{entry.pk}").status_code == 204
    assert_error(api_client.delete(f"/blocklist/{entry.pk}"), 404, "blocklist_entry_not_found")
    assert_error(api_client.delete("/blocklist/not-an-id"), 404, "blocklist_entry_not_found")
    assert [e["value"] for e in api_client.get("/blocklist").json()] == ["kept.example"]


def _csv(response) -> list[list[str]]:
    text = b"".join(response.streaming_content).decode()
    return list(csv.reader(io.StringIO(text)))


def test_csv_export(api_client, anon_client):
    add(api_client, ["a@one.example"], reason='=HYPERLINK("http://evil")')
    add(api_client, ["two.example"])
    response = api_client.get("/blocklist.csv", HTTP_ACCEPT="text/csv")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert "blocklist.csv" in response["Content-Disposition"]
    rows = _csv(response)
    assert rows[0] == ["value", "kind", "reason", "created_at"]
    by_value = {row[0]: row for row in rows[1:]}
    assert by_value["two.example"][1:3] == ["domain", ""]
    # A reason a spreadsheet would run as a formula is written as text.
    assert by_value["a@one.example"][2] == '\'=HYPERLINK("http://evil")'
    assert by_value["a@one.example"][3].endswith("Z")
    assert_error(anon_client.get("/blocklist.csv"), 401, "authentication_required")


def test_csv_export_neutralizes_formulas_in_every_cell_and_reads_back(api_client, other_client):
    formulas = ["=1+2@one.example", "+3@one.example", "-4@one.example"]
    add(api_client, [*formulas, "plain-1@one.example"], reason="@SUM(A1:A9)")
    rows = _csv(api_client.get("/blocklist.csv"))
    values = {row[0] for row in rows[1:]}
    # A formula's start is quoted; a plain address (a "-" inside it too) is unchanged.
    assert values == {
        "'=1+2@one.example",
        "'+3@one.example",
        "'-4@one.example",
        "plain-1@one.example",
    }
    assert {row[2] for row in rows[1:]} == {"'@SUM(A1:A9)"}
    # The value column, given back to POST /blocklist, is the same list.
    assert add(other_client, [row[0] for row in rows[1:]]).json()["added"] == 4
    assert {e["value"] for e in other_client.get("/blocklist").json()} == {
        e["value"] for e in api_client.get("/blocklist").json()
    }


@pytest.mark.parametrize(
    ("value", "cell"),
    [
        ('=HYPERLINK("http://evil.test","x")', '\'=HYPERLINK("http://evil.test","x")'),
        ("+1", "'+1"),
        ("-1", "'-1"),
        ("@x", "'@x"),
        ("\t=1", "'\t=1"),
        ("\r=1", "'\r=1"),
        ("plain", "plain"),
        ("a=b", "a=b"),
        ("", ""),
        (None, ""),
    ],
)
def test_csv_cell(value, cell):
    assert csv_cell(value) == cell
    if value:
        assert csv_cell_read(cell) == value


def test_address_keys_name_the_address_its_domain_and_parent_domains():
    assert address_keys("jo@mail.eu.acme.co.uk") == [
        "jo@mail.eu.acme.co.uk",
        "mail.eu.acme.co.uk",
        "eu.acme.co.uk",
        "acme.co.uk",
        "co.uk",
    ]


# --- imports and outreaches skip a blocked address ----------------------------------------


def test_an_import_skips_blocked_rows_with_the_reason(
    api_client, account, django_capture_on_commit_callbacks
):
    campaign = CampaignFactory(account=account)
    add(api_client, ["competitor.com", "Ceo@Partner.example"])
    rows = [
        {"email": "ok@customer.example"},
        {"email": "jane@competitor.com"},
        {"email": "ceo@partner.example", "first_name": "Not"},
        {"email": "bob@eu.competitor.com"},
        {"email": "JANE@competitor.com"},  # a repeat of a blocked row
        {"email": "someone@partner.example"},
        {"email": "broken"},
    ]
    body = {"contacts": rows, "campaign_id": str(campaign.pk)}
    with django_capture_on_commit_callbacks(execute=True):
        created = api_client.post("/contact_imports", body, format="json")
    assert created.status_code == 201, created.content
    result = api_client.get(f"/contact_imports/{created.json()['id']}").json()
    assert result["status"] == "completed"
    assert (result["created_count"], result["updated_count"], result["skipped_count"]) == (2, 0, 5)
    assert set(Contact.objects.filter(account=account).values_list("email_lower", flat=True)) == {
        "ok@customer.example",
        "someone@partner.example",
    }
    assert Enrollment.objects.filter(campaign=campaign).count() == 2
    blocked = [e for e in result["errors"] if e.get("reason") == "blocked"]
    assert sorted(e["row"] for e in blocked) == [1, 2, 3, 4]
    assert any("competitor.com" in e["message"] for e in blocked)
    assert [e["row"] for e in result["errors"] if "reason" not in e] == [6]


def test_an_outreach_to_a_blocked_address_is_refused(api_client, account):
    campaign = CampaignFactory(account=account)
    add(api_client, ["competitor.com"])
    body = {"campaign_id": str(campaign.pk), "contact": {"email": "Jane@Sales.Competitor.com"}}
    error = assert_error(
        api_client.post("/outreaches", body, format="json"), 422, "contact_blocked"
    )
    assert error["details"] == {"reason": "blocked", "entry": "competitor.com"}
    assert not Contact.objects.exists() and not Enrollment.objects.exists()
    # Another account's blocklist does not apply.
    other = CampaignFactory()
    assert BlocklistEntry.objects.filter(account=other.account).count() == 0


# --- dispatch and the scheduler stop a blocked enrollment ---------------------------------


def test_dispatch_stops_blocked_pending_enrollments(api_client, account):
    campaign = CampaignFactory(account=account)
    blocked = EnrollmentFactory(
        campaign=campaign, contact=ContactFactory(account=account, email="x@rival.example")
    )
    fine = EnrollmentFactory(campaign=campaign, contact=ContactFactory(account=account))
    add(api_client, ["rival.example"])
    response = api_client.post(
        f"/campaigns/{campaign.pk}/dispatch", {"all_pending": True}, format="json"
    )
    assert response.json()["dispatched"] == 1
    blocked.refresh_from_db()
    fine.refresh_from_db()
    assert (blocked.status, blocked.stop_reason) == ("stopped", "blocked")
    assert fine.status == "scheduled"
    stats = api_client.get(f"/campaigns/{campaign.pk}").json()["stats"]
    assert stats["stopped"] == 1
    listed = api_client.get(f"/campaigns/{campaign.pk}/enrollments?status=stopped").json()
    assert [(e["id"], e["stop_reason"]) for e in listed] == [(str(blocked.pk), "blocked")]


def _mailbox(sink, account):
    return CredentialFactory(
        account=account,
        smtp_host=sink.host,
        smtp_port=sink.port,
        smtp_security="none",
        smtp_username="",
        smtp_password="",
    )


def _send(batches, now):
    for batch in batches:
        batch_send(batch_id=batch.batch_id, credential_id=batch.credential_id, clock=lambda: now)


def test_an_entry_added_while_a_sequence_runs_stops_it_before_its_next_step(
    api_client, account, smtp_sink
):
    sink = smtp_sink()
    campaign = CampaignFactory(
        account=account, status=Campaign.Status.ACTIVE, with_steps=2, with_credential=False
    )
    campaign.credentials.add(_mailbox(sink, account))
    contacts = {
        name: ContactFactory(account=account, email=f"{name}@{domain}")
        for name, domain in [("ann", "sub.target.example"), ("bea", "other.example")]
    }
    for contact in contacts.values():
        EnrollmentFactory(campaign=campaign, contact=contact, status="scheduled", next_send_at=NOW)
    _send(schedule_due(now=NOW), NOW)
    assert sorted(m.rcpt_tos[0] for m in sink.messages) == [
        "ann@sub.target.example",
        "bea@other.example",
    ]

    add(api_client, ["target.example"])
    later = NOW + timedelta(days=1, minutes=1)
    _send(schedule_due(now=later), later)
    assert [m.rcpt_tos[0] for m in sink.messages[2:]] == ["bea@other.example"]
    ann = Enrollment.objects.get(contact=contacts["ann"])
    assert (ann.status, ann.stop_reason, ann.stopped_at) == ("stopped", "blocked", later)
    assert ann.next_send_at is None
    assert Message.objects.filter(enrollment=ann).count() == 1
    # Nothing left to send: the campaign completes.
    campaign.refresh_from_db()
    assert campaign.status == Campaign.Status.COMPLETED


def test_the_scheduler_reads_the_blocklist_once_per_batch(api_client, account, smtp_sink):
    sink = smtp_sink()
    campaign = CampaignFactory(
        account=account, status=Campaign.Status.ACTIVE, with_credential=False
    )
    campaign.credentials.add(_mailbox(sink, account))
    for n in range(30):
        EnrollmentFactory(
            campaign=campaign,
            contact=ContactFactory(account=account, email=f"p{n}@blocked{n % 3}.example"),
            status="scheduled",
            next_send_at=NOW,
        )
    add(api_client, ["blocked0.example"])
    with CaptureQueriesContext(connection) as queries:
        batches = schedule_due(now=NOW)
    assert sum(b.size for b in batches) == 20
    assert Enrollment.objects.filter(stop_reason="blocked").count() == 10
    reads = [q for q in queries.captured_queries if "outreach_blocklistentry" in q["sql"]]
    assert len(reads) == 1


# --- the back office ----------------------------------------------------------------------


def test_admin_lists_and_searches_entries(admin_client, api_client, account):
    add(api_client, ["findme.example", "a@elsewhere.example"], reason="competitor")
    url = reverse("admin:outreach_blocklistentry_changelist")
    page = admin_client.get(url, {"q": "FINDME"})
    assert page.status_code == 200
    assert b"findme.example" in page.content and b"elsewhere.example" not in page.content
    by_account = admin_client.get(url, {"q": account.email})
    assert b"findme.example" in by_account.content and b"elsewhere.example" in by_account.content
    entry = BlocklistEntry.objects.get(value="findme.example")
    change = admin_client.get(reverse("admin:outreach_blocklistentry_change", args=[entry.pk]))
    assert change.status_code == 200 and b"competitor" in change.content
    # Entries are added through the API, which normalises them.
    assert admin_client.get(reverse("admin:outreach_blocklistentry_add")).status_code == 403
