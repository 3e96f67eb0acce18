"""RECIPIENT_DOMAIN_CHECK at import and enroll, against a real DNS server: domains that
cannot receive mail are skipped with reason domain_has_no_mail_server; a DNS failure
never skips; verdicts are cached per domain."""

import threading
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.test import override_settings
from django.utils import timezone

from outreach.contacts import imports as contacts_imports
from outreach.domains import recipients
from outreach.domains.recipients import RecipientDomainLookups, domains_without_mail_server
from outreach.models.contacts import Contact, ContactImport
from outreach.models.sending import Enrollment
from tests.outreach.factories import CampaignFactory
from tests.outreach.helpers import assert_fields
from tests.outreach.test_contact_imports import run, run_dying_after_first_batch

pytestmark = pytest.mark.django_db


@pytest.fixture
def recipient_check(settings, dns_server):
    settings.RECIPIENT_DOMAIN_CHECK = True
    dns_server.add("mx.example.net", "MX", "10 mail.mx.example.net.")
    dns_server.add("a-only.example.net", "A", "192.0.2.1")
    dns_server.add("v6-only.example.net", "AAAA", "2001:db8::1")
    dns_server.add("null.example.net", "MX", "0 .")
    dns_server.add("txt-only.example.net", "TXT", "hello")
    dns_server.drop("slow.example.net")
    dns_server.servfail("broken.example.net")
    return dns_server


def test_import_skips_domains_without_a_mail_server(
    api_client, account, recipient_check, django_capture_on_commit_callbacks
):
    campaign = CampaignFactory(account=account)
    csv = (
        "email\n"
        "a@mx.example.net\nb@a-only.example.net\nc@v6-only.example.net\n"
        "d@null.example.net\ne@txt-only.example.net\nf@nowhere.example.net\nF@Nowhere.example.net\n"
        "g@slow.example.net\nh@broken.example.net\n"
    )
    result = run(django_capture_on_commit_callbacks, api_client, csv, campaign_id=str(campaign.pk))
    assert result["status"] == "completed"
    kept = [
        "a@mx.example.net",
        "b@a-only.example.net",
        "c@v6-only.example.net",
        "g@slow.example.net",
        "h@broken.example.net",
    ]
    assert sorted(Contact.objects.values_list("email", flat=True)) == kept
    assert sorted(Enrollment.objects.values_list("contact__email", flat=True)) == kept
    assert (result["created_count"], result["updated_count"], result["skipped_count"]) == (5, 0, 4)
    assert [(e["row"], e["email"], e["reason"]) for e in result["errors"]] == [
        (5, "d@null.example.net", "domain_has_no_mail_server"),
        (6, "e@txt-only.example.net", "domain_has_no_mail_server"),
        (7, "f@nowhere.example.net", "domain_has_no_mail_server"),
        (8, "F@Nowhere.example.net", "domain_has_no_mail_server"),
    ]
    assert "null.example.net cannot receive mail" in result["errors"][0]["message"]


def test_each_domain_is_asked_once_and_cached(api_client, recipient_check):
    assert domains_without_mail_server(
        ["mx.example.net", "null.example.net", "nowhere.example.net", "slow.example.net"]
    ) == {
        "null.example.net",
        "nowhere.example.net",
    }
    asked = len(recipient_check.queries)
    assert domains_without_mail_server(
        ["MX.example.net", "null.example.net", "nowhere.example.net"]
    ) == {
        "null.example.net",
        "nowhere.example.net",
    }
    assert len(recipient_check.queries) == asked  # from the cache
    # A failure is not cached: asked again.
    domains_without_mail_server(["slow.example.net"])
    assert recipient_check.queries.count(("slow.example.net", "MX")) == 2


def test_the_cache_is_per_resolver_configuration(settings, recipient_check):
    domains_without_mail_server(["nowhere.example.net"])
    settings.DNS_RESOLVERS = f"{recipient_check.address},127.0.0.1:1"
    asked = len(recipient_check.queries)
    domains_without_mail_server(["nowhere.example.net"])
    assert len(recipient_check.queries) == asked + 1
    cache.clear()


def test_outreach_refuses_an_address_without_a_mail_server(api_client, account, recipient_check):
    campaign = CampaignFactory(account=account)
    response = api_client.post(
        "/outreaches",
        {"campaign_id": str(campaign.pk), "contact": {"email": "x@null.example.net"}},
        format="json",
    )
    fields = assert_fields(response, "contact.email")
    assert "domain_has_no_mail_server" in fields["contact.email"][0]
    assert not Contact.objects.exists() and not Enrollment.objects.exists()
    for email in ("y@mx.example.net", "z@slow.example.net"):
        response = api_client.post(
            "/outreaches",
            {"campaign_id": str(campaign.pk), "contact": {"email": email}},
            format="json",
        )
        assert response.status_code == 201, response.content


def test_off_means_no_lookup(
    api_client, account, settings, dns_server, django_capture_on_commit_callbacks
):
    settings.RECIPIENT_DOMAIN_CHECK = False
    result = run(django_capture_on_commit_callbacks, api_client, "email\na@nowhere.example.net\n")
    assert result["created_count"] == 1
    campaign = CampaignFactory(account=account)
    response = api_client.post(
        "/outreaches",
        {"campaign_id": str(campaign.pk), "contact": {"email": "b@nowhere.example.net"}},
        format="json",
    )
    assert response.status_code == 201
    assert dns_server.queries == []


@override_settings(CONTACT_IMPORT_BATCH_SIZE=2, DNS_TIMEOUT_SECONDS=10)
def test_an_import_asks_about_the_next_batches_before_it_writes_one(account, recipient_check):
    """The domains of the batches read ahead are asked about while a batch waits for its
    own and is written: the server holds its answer about the first batch's domain until
    it has been asked about the second and third batches' (or gives up waiting), so the
    order of what it was asked and of the commits shows whether the lookups overlap."""
    events: list[tuple[str, str]] = []
    read_ahead = {
        "two.bulk.example.net": threading.Event(),
        "three.bulk.example.net": threading.Event(),
    }
    answer = recipient_check.resolve

    def resolve(request, handler):
        name = str(request.q.qname).rstrip(".").lower()
        events.append(("asked", name))
        if name in read_ahead:
            read_ahead[name].set()
        if name == "one.bulk.example.net":
            for asked in read_ahead.values():
                asked.wait(5)  # a bound, not a measure: the order below is the test
        return answer(request, handler)

    recipient_check.resolve = resolve
    recipient_check.add("*.bulk.example.net", "MX", "10 mx.bulk.example.net.")
    recipient_check.add("one.bulk.example.net", "MX", "0 .")  # no mail: its rows skipped
    # Batches of two rows: one, two, three (a domain of the second batch again), four, five.
    domains = ["one", "one", "two", "two", "two", "three", "four", "four", "five"]
    emails = [
        f"{person}@{domain}.bulk.example.net"
        for person, domain in zip("abcdefghi", domains, strict=True)
    ]
    csv = "email\n" + "".join(f"{email}\n" for email in emails)
    contact_import = ContactImport.objects.create(
        account=account, source_format="csv", source_data=csv.encode()
    )

    def progress(done, total):
        events.append(("committed", str(done)))

    result = contacts_imports.contact_import_run(import_id=contact_import.pk, progress=progress)

    asked = [name.split(".")[0] for kind, name in events if kind == "asked"]
    # Each domain once (the third batch's "two" is the second batch's lookup); the first
    # three batches' questions are sent together, in any order.
    assert sorted(asked[:3]) == ["one", "three", "two"]
    assert sorted(asked[3:]) == ["five", "four"]
    order = [name.split(".")[0] if kind == "asked" else name for kind, name in events]
    # The second and third batches were asked about before the first batch was written;
    # the fourth and fifth (beyond IMPORT_READ_AHEAD_BATCHES) only after the batches
    # before them.
    assert order.index("two") < order.index("2")
    assert order.index("three") < order.index("2") < order.index("four")
    assert order.index("4") < order.index("five")
    assert [name for kind, name in events if kind == "committed"] == ["2", "4", "6", "8", "9"]
    assert (result.status, result.created_count, result.skipped_count) == ("completed", 7, 2)
    assert [(e["row"], e["reason"]) for e in result.errors] == [
        (2, "domain_has_no_mail_server"),
        (3, "domain_has_no_mail_server"),
    ]
    assert sorted(Contact.objects.values_list("email", flat=True)) == emails[2:]


@override_settings(CONTACT_IMPORT_BATCH_SIZE=2, CONTACT_IMPORT_STALE_SECONDS=60)
def test_a_run_that_dies_with_batches_read_ahead_resumes_to_the_same_result(
    account, recipient_check
):
    """The batches read ahead when a run dies were neither written nor counted: the
    re-driven run does them once, with each skipped row reported once."""
    csv = (
        "email\n"
        "a@null.example.net\nb@mx.example.net\n"
        "c@nowhere.example.net\nd@a-only.example.net\n"
        "e@slow.example.net\nf@mx.example.net\n"
    )
    contact_import = ContactImport.objects.create(
        account=account, source_format="csv", source_data=csv.encode()
    )

    run_dying_after_first_batch(contact_import)
    contact_import.refresh_from_db()
    assert (contact_import.processed_rows, contact_import.skipped_count) == (2, 1)
    assert [e["row"] for e in contact_import.errors] == [2]
    assert list(Contact.objects.values_list("email", flat=True)) == ["b@mx.example.net"]

    ContactImport.objects.filter(pk=contact_import.pk).update(
        heartbeat_at=timezone.now() - timedelta(seconds=61)
    )
    result = contacts_imports.contact_import_run(import_id=contact_import.pk)
    assert (result.status, result.attempts, result.processed_rows) == ("completed", 2, 6)
    assert (result.created_count, result.updated_count, result.skipped_count) == (4, 0, 2)
    assert [(e["row"], e["email"], e["reason"]) for e in result.errors] == [
        (2, "a@null.example.net", "domain_has_no_mail_server"),
        (4, "c@nowhere.example.net", "domain_has_no_mail_server"),
    ]
    assert sorted(Contact.objects.values_list("email", flat=True)) == [
        "b@mx.example.net",
        "d@a-only.example.net",
        "e@slow.example.net",  # a time-out never skips
        "f@mx.example.net",
    ]


def test_an_import_remembers_its_verdicts_for_the_next_batches(recipient_check, monkeypatch):
    """A domain answered for one batch is not read from the cache again for the next
    (the cache is emptied here to show it); a failed lookup is not remembered."""
    with RecipientDomainLookups() as lookups:
        first = lookups.ask(["mx.example.net", "null.example.net", "slow.example.net"])
        assert lookups.without_mail_server(first) == {"null.example.net"}
        cache.clear()
        asked = len(recipient_check.queries)
        reads = []
        get_many = cache.get_many
        monkeypatch.setattr(cache, "get_many", lambda keys: reads.extend(keys) or get_many(keys))

        second = lookups.ask(["MX.example.net", "null.example.net", "slow.example.net"])
        assert lookups.without_mail_server(second) == {"null.example.net"}
        assert [key.rpartition(":")[2] for key in reads] == ["slow.example.net"]
        assert recipient_check.queries[asked:] == [("slow.example.net", "MX")]


def test_what_an_import_remembers_is_bounded(recipient_check, monkeypatch):
    monkeypatch.setattr(recipients, "RUN_MEMORY_DOMAINS", 2)
    with RecipientDomainLookups() as lookups:
        first = lookups.ask(["mx.example.net", "null.example.net", "a-only.example.net"])
        assert lookups.without_mail_server(first) == {"null.example.net"}
        cache.clear()
        asked = len(recipient_check.queries)
        # Two are remembered; the one forgotten (the first remembered) is looked up again.
        again = lookups.ask(["mx.example.net", "null.example.net", "a-only.example.net"])
        assert lookups.without_mail_server(again) == {"null.example.net"}
        assert again.domains == {recipient_check.queries[asked][0]}
        assert {name for name, _ in recipient_check.queries[asked:]} == set(again.domains)


def test_what_an_import_remembers_expires(recipient_check, monkeypatch):
    monkeypatch.setattr(recipients, "RUN_MEMORY_SECONDS", 0)
    with RecipientDomainLookups() as lookups:
        assert lookups.without_mail_server(lookups.ask(["null.example.net"])) == {
            "null.example.net"
        }
        cache.clear()
        asked = len(recipient_check.queries)
        assert lookups.without_mail_server(lookups.ask(["null.example.net"])) == {
            "null.example.net"
        }
        assert recipient_check.queries[asked:] == [("null.example.net", "MX")]


def test_closing_stops_the_lookups_not_answered(recipient_check, settings):
    settings.DNS_TIMEOUT_SECONDS = 30
    lookups = RecipientDomainLookups()
    asked = lookups.ask(["slow.example.net"])
    for _ in range(500):  # until the server holds the question (a bound, not a measure)
        if recipient_check.queries:
            break
        threading.Event().wait(0.01)
    [held] = lookups._verdicts.values()
    lookups.close()
    assert held.cancelled()
    # A new run asks again (nothing was cached) and is answered within its own bound.
    settings.DNS_TIMEOUT_SECONDS = 0.5
    assert domains_without_mail_server(asked.domains) == set()
    assert recipient_check.queries.count(("slow.example.net", "MX")) == 2
