"""The SDK's deliverability calls against the live service (docs/deliverability.md): the
blocklist (one and many, the list's filters and pages, delete, the CSV export), the
sending defaults, a mailbox's sender domain check and the tracking domain against a real
DNS server on loopback, and click tracking on campaigns and in their stats."""

import csv
import io

import pytest
import requests
from outreach_sdk import Client, errors, models
from outreach_sdk.client import BLOCKLIST_ADD_MAX

from outreach.campaigns import clicks
from outreach.models.blocklist import BlocklistEntry
from outreach.models.sending import Enrollment
from tests.accounts.factories import AccountFactory
from tests.clients.conftest import mailbox_create
from tests.intake.factories import sent_enrollment
from tests.outreach.factories import CredentialFactory

pytestmark = [pytest.mark.e2e]

SERVICE_HOST = "service.test"  # the CNAME target of tracking domains, in these tests


@pytest.fixture
def client(service_url, sdk_key) -> Client:
    return Client(api_key=sdk_key, base_url=service_url)


# --- blocklist ---------------------------------------------------------------------------


def test_one_address_or_domain_is_blocked_and_its_entry_comes_back(client, sdk_account):
    entry = client.blocklist.add("Ada@Example.ORG", reason="asked us")

    assert isinstance(entry, models.BlocklistEntry)
    assert (entry.value, entry.kind, entry.reason) == ("ada@example.org", "email", "asked us")
    assert entry.created_at is not None and entry.created_at.tzinfo is not None
    domain = client.blocklist.add("@competitor.example")
    assert (domain.value, domain.kind, domain.reason) == ("competitor.example", "domain", None)
    assert client.blocklist.add("competitor.example").id == domain.id  # already there
    assert BlocklistEntry.objects.filter(account=sdk_account).count() == 2

    with pytest.raises(errors.ValidationFailed) as raised:
        client.blocklist.add("not an address")
    assert raised.value.status is None  # the service listed it as invalid
    assert list(raised.value.details["fields"]) == ["value"]
    assert BlocklistEntry.objects.filter(account=sdk_account).count() == 2


def test_many_are_added_in_calls_of_ten_thousand_with_the_counts_summed(
    client, sdk_key, sdk_account, proxy
):
    BlocklistEntry.objects.create(account=sdk_account, value="b0@bulk.example", kind="email")
    values = [f"b{n}@bulk.example" for n in range(BLOCKLIST_ADD_MAX + 2)]
    values += ["b1@bulk.example", "localhost", 42]
    counting = Client(api_key=sdk_key, base_url=proxy.url)

    result = counting.blocklist.add_many(iter(values), reason="bulk")

    assert isinstance(result, models.BlocklistAddResult)
    assert (result.added, result.existing) == (BLOCKLIST_ADD_MAX + 1, 2)
    assert [item["value"] for item in result.invalid] == ["localhost", "42"]
    assert result.raw == {"added": result.added, "existing": 2, "invalid": result.invalid}
    posts = [path for method, path, _ in proxy.requests if method == "POST"]
    assert posts == ["/blocklist", "/blocklist"]
    rows = BlocklistEntry.objects.filter(account=sdk_account)
    assert rows.count() == BLOCKLIST_ADD_MAX + 2
    assert rows.filter(reason="bulk").count() == BLOCKLIST_ADD_MAX + 1

    with pytest.raises(errors.ValidationFailed) as raised:
        client.blocklist.add_many(["a@b.example"], reason="x" * 201)
    assert list(raised.value.details["fields"]) == ["reason"]
    assert client.blocklist.add_many([]).added == 0  # nothing to send: no call


def test_the_list_filters_and_pages_and_an_entry_is_deleted(client, sdk_key, sdk_account, proxy):
    client.blocklist.add_many(["a@one.example", "two.example", "b@three.example"])
    theirs = BlocklistEntry.objects.create(
        account=AccountFactory(), value="other.example", kind="domain"
    )
    paging = Client(api_key=sdk_key, base_url=proxy.url)

    listed = list(paging.blocklist.list(limit=2))

    assert {e.value for e in listed} == {"a@one.example", "two.example", "b@three.example"}
    assert all(isinstance(e, models.BlocklistEntry) for e in listed)
    pages = [path for method, path, _ in proxy.requests if path.startswith("/blocklist")]
    assert len(pages) == 2 and "starting_after=" in pages[1]
    assert [e.value for e in client.blocklist.list(kind="domain")] == ["two.example"]
    [found] = client.blocklist.list(value="A@ONE.example")
    assert found.value == "a@one.example"
    with pytest.raises(errors.ValidationFailed) as raised:
        list(client.blocklist.list(kind="company"))
    assert list(raised.value.details["fields"]) == ["kind"]

    client.blocklist.delete(found.id)
    assert list(client.blocklist.list(value="a@one.example")) == []
    with pytest.raises(errors.BlocklistEntryNotFound) as raised:
        client.blocklist.delete(found.id)
    assert raised.value.status == 404
    with pytest.raises(errors.BlocklistEntryNotFound):
        client.blocklist.delete(str(theirs.pk))
    assert BlocklistEntry.objects.filter(pk=theirs.pk).exists()


def test_the_csv_export_comes_whole_or_in_chunks(client, service_url):
    client.blocklist.add("=cmd@formula.example", reason="=HYPERLINK(1)")
    client.blocklist.add_many([f"c{n}@csv.example" for n in range(300)])

    body = client.blocklist.export_csv()

    rows = list(csv.reader(io.StringIO(body.decode())))
    assert rows[0] == ["value", "kind", "reason", "created_at"]
    assert len(rows) == 302
    # Both cells a spreadsheet would run are quoted (config.api.csv_export).
    [formula] = [row for row in rows if row[0] == "'=cmd@formula.example"]
    assert formula[1:3] == ["email", "'=HYPERLINK(1)"]
    chunks = list(client.blocklist.stream_csv(chunk_size=1024))
    assert len(chunks) > 1 and all(len(chunk) <= 1024 for chunk in chunks)
    assert b"".join(chunks) == body

    stranger = Client(api_key="ak_live_unknown", base_url=service_url)
    with pytest.raises(errors.InvalidApiKey):
        stranger.blocklist.export_csv()


def test_an_outreach_to_a_blocked_address_is_refused(client, sdk_account, smtp_sink):
    mailbox = mailbox_create(client, smtp_sink())
    campaign = client.campaigns.create(
        name="Q4",
        credential_ids=[mailbox.id],
        steps=[{"subject": "Hi", "body_text": "Hello.", "delay_minutes": 0}],
    )
    entry = client.blocklist.add("competitor.example")

    with pytest.raises(errors.ContactBlocked) as raised:
        client.outreaches.create(
            campaign_id=campaign.id, contact={"email": "joe@eu.competitor.example"}
        )

    assert raised.value.status == 422
    assert raised.value.details["entry"] == "competitor.example"
    assert entry.value == "competitor.example"
    assert list(client.campaigns.enrollments(campaign.id)) == []


def test_a_blocked_enrollment_reads_stopped_for_blocked(client, sdk_account):
    enrollment = sent_enrollment(account=sdk_account)
    Enrollment.objects.filter(pk=enrollment.pk).update(
        status=Enrollment.Status.STOPPED, stop_reason=Enrollment.StopReason.BLOCKED
    )

    [listed] = client.campaigns.enrollments(str(enrollment.campaign_id))

    assert (listed.status, listed.stop_reason) == ("stopped", "blocked")


# --- sending defaults ----------------------------------------------------------------------


def test_the_sending_defaults_are_read_and_changed(client, sdk_account):
    assert client.sending_defaults.retrieve() == models.SendingDefaults(
        max_per_recipient_domain_per_day=None
    )

    assert client.sending_defaults.update(max_per_recipient_domain_per_day=3) == (
        models.SendingDefaults(max_per_recipient_domain_per_day=3)
    )
    assert client.sending_defaults.update().max_per_recipient_domain_per_day == 3  # unchanged
    assert client.sending_defaults.get().max_per_recipient_domain_per_day == 3
    sdk_account.refresh_from_db()
    assert sdk_account.max_per_recipient_domain_per_day == 3

    with pytest.raises(errors.ValidationFailed) as raised:
        client.sending_defaults.update(max_per_recipient_domain_per_day=0)
    assert list(raised.value.details["fields"]) == ["max_per_recipient_domain_per_day"]

    cleared = client.sending_defaults.update(max_per_recipient_domain_per_day=None)
    assert cleared.max_per_recipient_domain_per_day is None
    sdk_account.refresh_from_db()
    assert sdk_account.max_per_recipient_domain_per_day is None


# --- sender domain check and tracking domain, against a real DNS server --------------------


@pytest.fixture
def dns_service(service_server, dns_server, sdk_key):
    """The service asking the test's DNS server; its tracking CNAME target SERVICE_HOST."""
    url = service_server(
        DNS_RESOLVERS=dns_server.address,
        DNS_TIMEOUT_SECONDS="0.5",
        TRACKING_DOMAIN_CNAME_TARGET=SERVICE_HOST,
    )
    return Client(api_key=sdk_key, base_url=url)


def test_a_mailboxs_sender_domain_is_checked(dns_service, dns_server, smtp_sink):
    client = dns_service
    dns_server.add("example.com", "TXT", "v=spf1 mx +all")
    dns_server.add("example.com", "MX", "10 mx.example.com.")
    dns_server.add("_dmarc.example.com", "TXT", "v=DMARC1; p=none")
    dns_server.add("sales2024._domainkey.example.com", "TXT", "v=DKIM1; k=rsa; p=MIGf")
    mailbox = mailbox_create(client, smtp_sink())  # ada@example.com

    before = client.mailboxes.domain_check(mailbox.id)
    assert isinstance(before, models.DomainCheck)
    assert (before.domain, before.status, before.checked_at) == ("example.com", "pending", None)
    assert before.findings == []

    check = client.mailboxes.check_domain(mailbox.id)
    codes = {finding.code: finding.level for finding in check.findings}
    assert codes["dkim_not_found"] == "error" and codes["spf_allows_all"] == "warning"
    assert codes["dmarc_policy_none"] == "warning"
    assert check.status == "error" and check.checked_at is not None
    assert [f.code for f in check.errors] == [f.code for f in check.findings if f.level == "error"]
    assert all(isinstance(f, models.DomainFinding) and f.message for f in check.findings)
    assert check.records["dmarc"] == "v=DMARC1; p=none"

    named = client.mailboxes.check_domain(mailbox.id, dkim_selectors=["Sales2024"])
    assert named.dkim_selectors == ["sales2024"]
    assert "dkim_not_found" not in {f.code for f in named.findings}
    assert {f.code for f in named.warnings} >= {"spf_allows_all", "dmarc_policy_none"}
    assert client.mailboxes.domain_check(mailbox.id) == named

    with pytest.raises(errors.ValidationFailed) as raised:
        client.mailboxes.check_domain(mailbox.id, dkim_selectors=["no spaces"])
    assert list(raised.value.details["fields"]) == ["dkim_selectors"]
    theirs = CredentialFactory()
    with pytest.raises(errors.CredentialNotFound):
        client.mailboxes.domain_check(str(theirs.pk))
    with pytest.raises(errors.CredentialNotFound):
        client.mailboxes.check_domain(str(theirs.pk))


def test_the_tracking_domain_is_set_checked_and_removed(dns_service, dns_server):
    client = dns_service
    dns_server.add("track.example.com", "CNAME", f"{SERVICE_HOST}.")
    dns_server.add("links.example.com", "CNAME", "elsewhere.example.")

    none = client.tracking_domain.retrieve()
    assert isinstance(none, models.TrackingDomain)
    assert (none.domain, none.status, none.cname_target) == (None, None, SERVICE_HOST)
    assert none.txt_name is None and none.txt_value.startswith("outreach-verification=")
    for name in ("track", "links", "slow"):  # the proof this account owns them
        dns_server.add(f"_outreach-verify.{name}.example.com", "TXT", none.txt_value)

    verified = client.tracking_domain.set("Track.Example.com")
    assert (verified.domain, verified.status) == ("track.example.com", "verified")
    assert verified.txt_name == "_outreach-verify.track.example.com"
    assert verified.checked_at is not None
    assert client.tracking_domain.get() == verified

    failed = client.tracking_domain.set("links.example.com")
    assert (failed.domain, failed.status) == ("links.example.com", "failed")
    dns_server.drop("slow.example.com")  # the lookup times out: not known yet
    pending = client.tracking_domain.set("slow.example.com")
    assert (pending.domain, pending.status) == ("slow.example.com", "pending")

    removed = client.tracking_domain.remove()
    assert (removed.domain, removed.status, removed.checked_at) == (None, None, None)

    AccountFactory(tracking_domain="taken.example.com", tracking_domain_status="verified")
    with pytest.raises(errors.ValidationFailed) as raised:
        client.tracking_domain.set("taken.example.com")
    assert list(raised.value.details["fields"]) == ["domain"]
    with pytest.raises(errors.ValidationFailed):
        client.tracking_domain.set("not a host")
    assert client.tracking_domain.retrieve().domain is None


# --- click tracking ------------------------------------------------------------------------


def test_campaigns_track_clicks_and_their_stats_count_them(client, sdk_account, service_url):
    created = client.campaigns.create(
        name="Clicks",
        track_clicks=True,
        require_authenticated_domain=True,
        max_per_recipient_domain_per_day=5,
    )
    assert (created.track_clicks, created.require_authenticated_domain) == (True, True)
    assert created.max_per_recipient_domain_per_day == 5
    updated = client.campaigns.update(
        created.id, track_clicks=False, max_per_recipient_domain_per_day=None
    )
    assert (updated.track_clicks, updated.max_per_recipient_domain_per_day) == (False, None)
    with pytest.raises(errors.ValidationFailed) as raised:
        client.campaigns.update(created.id, track_clicks="yes")
    assert list(raised.value.details["fields"]) == ["track_clicks"]

    enrollment = sent_enrollment(account=sdk_account)
    token = clicks.click_token_make(
        enrollment_id=enrollment.pk, step=1, variant="A", url="https://acme.example/pricing"
    )
    redirect = requests.get(f"{service_url}/t/c/{token}", allow_redirects=False, timeout=10)
    assert redirect.headers["Location"] == "https://acme.example/pricing"
    campaign_id = str(enrollment.campaign_id)

    stats = client.campaigns.stats(campaign_id)
    assert isinstance(stats, models.CampaignStats)
    assert (stats.campaign_id, stats.clicked) == (campaign_id, 1)
    [variant] = [v for v in stats.steps[0]["variants"] if v["variant"] == "A"]
    assert variant["clicked"] == 1
    assert client.campaigns.retrieve(campaign_id).stats["clicked"] == 1
    [listed] = client.campaigns.enrollments(campaign_id)
    assert listed.clicked_at is not None and listed.clicked_at.tzinfo is not None
    types = {t.type for t in client.webhooks.event_types()}
    assert "enrollment.clicked" in types
