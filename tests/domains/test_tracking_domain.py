"""GET/PUT /tracking_domain, its CNAME and TXT verification against a real DNS server,
which account a domain is, beat's re-check, the pixel of sent emails on the verified
host, and requests for that host (a token answers on its own account's host only)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.models import Account
from outreach.campaigns.clicks import click_token_make
from outreach.campaigns.tracking import tracking_base_url
from outreach.domains.beat import tracking_domains_check
from outreach.domains.tracking import verification_token
from outreach.enrollments.deletions import enrollments_delete
from outreach.intake.views import PIXEL_GIF
from outreach.models.campaigns import CampaignStep
from outreach.sending import tokens
from tests.accounts.factories import AccountFactory
from tests.intake.factories import sent_enrollment
from tests.outreach.helpers import assert_fields
from tests.outreach.test_sending import _campaign, _enroll, _run

pytestmark = pytest.mark.django_db


@pytest.fixture
def zone(dns_server, settings):
    # TRACKING_DOMAIN_CNAME_TARGET is BASE_URL's host (testserver) in the tests.
    dns_server.add("track.acme.test", "CNAME", "testserver.")
    dns_server.add("elsewhere.acme.test", "CNAME", "other.host.test.")
    dns_server.add("plain.acme.test", "A", "192.0.2.7")
    dns_server.drop("slow.acme.test")
    return dns_server


def put(client, domain):
    return client.put("/tracking_domain", {"domain": domain}, format="json")


def prove(zone, client, domain):
    """Publish the TXT record the API names for `client`'s account and `domain`."""
    body = client.get("/tracking_domain").json()
    zone.add(f"_outreach-verify.{domain}", "TXT", body["txt_value"])
    return body["txt_value"]


def test_none_at_first(api_client, account):
    token = verification_token(account.pk)
    assert len(token) == 32 and token != verification_token(AccountFactory().pk)
    assert api_client.get("/tracking_domain").json() == {
        "domain": None,
        "status": None,
        "checked_at": None,
        "cname_target": "testserver",
        "txt_name": None,
        "txt_value": f"outreach-verification={token}",
    }


def test_a_cname_and_the_accounts_txt_record_are_verified_and_used(api_client, account, zone):
    # Another service's TXT value beside ours does not matter.
    zone.add("_outreach-verify.track.acme.test", "TXT", "some-other-verification=abc")
    prove(zone, api_client, "track.acme.test")
    response = put(api_client, "Track.Acme.test.")
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["domain"], body["status"]) == ("track.acme.test", "verified")
    assert body["txt_name"] == "_outreach-verify.track.acme.test"
    assert body["checked_at"] is not None
    assert api_client.get("/tracking_domain").json() == body
    account.refresh_from_db()
    assert tracking_base_url(account) == "https://track.acme.test"


def test_a_cname_without_the_accounts_txt_record_is_not_used(
    api_client, other_client, account, zone, settings
):
    """The CNAME alone proves nothing: every account's domain points at the service."""
    body = put(api_client, "track.acme.test").json()
    assert (body["domain"], body["status"]) == ("track.acme.test", "failed")
    # Another account's token there is no proof for this one.
    prove(zone, other_client, "track.acme.test")
    assert put(api_client, "track.acme.test").json()["status"] == "failed"
    account.refresh_from_db()
    assert tracking_base_url(account) == settings.BASE_URL


@pytest.mark.parametrize(
    ("domain", "status"),
    [
        ("elsewhere.acme.test", "failed"),
        ("plain.acme.test", "failed"),
        ("no.acme.test", "failed"),
        ("slow.acme.test", "pending"),
    ],
)
def test_anything_else_is_not_used(api_client, account, zone, domain, status, settings):
    prove(zone, api_client, domain)
    body = put(api_client, domain).json()
    assert (body["domain"], body["status"]) == (domain, status)
    account.refresh_from_db()
    assert tracking_base_url(account) == settings.BASE_URL


def test_removing_it(api_client, account, zone):
    put(api_client, "track.acme.test")
    for empty in (None, ""):
        body = put(api_client, empty).json()
        assert body["domain"] is None and body["status"] is None
    account.refresh_from_db()
    assert account.tracking_domain == ""


@pytest.mark.parametrize(
    "domain", ["not a host", "192.0.2.1", "localhost", "a" * 254, "testserver.", "-x.acme.test"]
)
def test_bad_domains_are_refused(api_client, account, domain):
    assert_fields(put(api_client, domain), "domain")
    account.refresh_from_db()
    assert account.tracking_domain == ""


def test_unknown_and_missing_fields(api_client):
    assert_fields(api_client.put("/tracking_domain", {}, format="json"), "domain")


def test_another_accounts_verified_domain_is_refused_until_it_lets_go(
    api_client, other_client, account, zone
):
    prove(zone, other_client, "track.acme.test")
    assert put(other_client, "track.acme.test").json()["status"] == "verified"
    # Even with this account's record published beside it, a verified claim stands.
    prove(zone, api_client, "track.acme.test")
    fields = assert_fields(put(api_client, "track.acme.test"), "domain")
    assert "another account's verified tracking domain" in fields["domain"][0]
    assert put(other_client, None).status_code == 200
    assert put(api_client, "track.acme.test").json()["status"] == "verified"


def test_the_account_that_proves_the_domain_takes_it_from_an_unproven_claim(
    api_client, other_client, account, other_account, zone, settings
):
    """First come is not first served: a claim without the TXT record holds nothing."""
    squatter = put(other_client, "track.acme.test").json()
    assert (squatter["domain"], squatter["status"]) == ("track.acme.test", "failed")
    # The owner, before publishing its record, is told which one.
    (message,) = assert_fields(put(api_client, "track.acme.test"), "domain")["domain"]
    value = f"outreach-verification={verification_token(account.pk)}"
    assert "_outreach-verify.track.acme.test" in message and value in message
    account.refresh_from_db()
    assert account.tracking_domain == ""

    prove(zone, api_client, "track.acme.test")
    body = put(api_client, "track.acme.test").json()
    assert (body["domain"], body["status"]) == ("track.acme.test", "verified")
    assert other_client.get("/tracking_domain").json()["domain"] is None
    other_account.refresh_from_db()
    assert tracking_base_url(other_account) == settings.BASE_URL
    # And the squatter cannot take it back.
    assert_fields(put(other_client, "track.acme.test"), "domain")


def test_needs_a_key(anon_client):
    assert anon_client.get("/tracking_domain").status_code == 401
    assert anon_client.put("/tracking_domain", {"domain": "x.acme.test"}).status_code == 401


def _txt(zone, account, domain):
    zone.add(
        f"_outreach-verify.{domain}",
        "TXT",
        f"outreach-verification={verification_token(account.pk)}",
    )


def test_beat_checks_again(zone):
    now = timezone.now()
    pending = AccountFactory(tracking_domain="track.acme.test", tracking_domain_status="pending")
    _txt(zone, pending, "track.acme.test")
    gone = AccountFactory(
        tracking_domain="elsewhere.acme.test",
        tracking_domain_status="verified",
        tracking_domain_checked_at=now - timedelta(hours=25),
    )
    _txt(zone, gone, "elsewhere.acme.test")
    zone.add("untxt.acme.test", "CNAME", "testserver.")
    # Not verified yet: both records are asked for.
    unproven = AccountFactory(tracking_domain="untxt.acme.test", tracking_domain_status="pending")
    recent = AccountFactory(
        tracking_domain="plain.acme.test",
        tracking_domain_status="verified",
        tracking_domain_checked_at=now - timedelta(hours=1),
    )
    unknown = AccountFactory(tracking_domain="slow.acme.test", tracking_domain_status="failed")
    AccountFactory()
    assert tracking_domains_check() == 4
    status = dict(Account.objects.values_list("pk", "tracking_domain_status"))
    assert status[pending.pk] == "verified"
    assert status[gone.pk] == "failed"  # its CNAME moved away: no longer used
    assert status[unproven.pk] == "failed"  # a CNAME without the TXT record: not taken
    assert status[recent.pk] == "verified"  # checked an hour ago: left for now
    assert status[unknown.pk] == "failed"  # the lookup failed: the status stays


def test_sent_pixels_use_the_verified_domain(smtp_sink, zone):
    sink = smtp_sink()
    campaign = _campaign(sink)
    Account.objects.filter(pk=campaign.account_id).update(
        tracking_domain="track.acme.test", tracking_domain_status="verified"
    )
    CampaignStep.objects.filter(campaign=campaign).update(body_html="<p>Hi</p>")
    enrollment = _enroll(campaign)
    _run()
    (received,) = sink.messages
    html = received.message.get_body(("html",)).get_content()
    pixel = tokens.token_make(purpose=tokens.OPEN, enrollment_id=enrollment.pk, step=1)
    assert f'background="https://track.acme.test/t/o/{pixel}.gif"' in html
    # The unsubscribe link stays on the service's host.
    assert "http://testserver/u/" in received.message["List-Unsubscribe"]


def test_the_verified_host_serves_tracking_paths_only(client, account):
    Account.objects.filter(pk=account.pk).update(
        tracking_domain="track.acme.test", tracking_domain_status="verified"
    )
    AccountFactory(tracking_domain="wait.acme.test", tracking_domain_status="pending")
    assert client.get("/t/o/whatever.gif", HTTP_HOST="track.acme.test").status_code == 200
    assert client.get("/t/o/whatever.gif", HTTP_HOST="track.acme.test:443").status_code == 200
    # Not a tracking path, an unverified domain, an unknown host: Django's 400 as before.
    assert client.get("/docs", HTTP_HOST="track.acme.test").status_code == 400
    assert client.get("/t/o/whatever.gif", HTTP_HOST="wait.acme.test").status_code == 400
    assert client.get("/t/o/whatever.gif", HTTP_HOST="evil.test").status_code == 400


# --- a token answers on its own account's host ---------------------------------------------


def _verified(account, domain):
    Account.objects.filter(pk=account.pk).update(
        tracking_domain=domain, tracking_domain_status="verified"
    )


def _paths(enrollment):
    pixel = tokens.token_make(purpose=tokens.OPEN, enrollment_id=enrollment.pk)
    click = click_token_make(
        enrollment_id=enrollment.pk, step=1, variant="A", url="https://acme.example/pricing"
    )
    return f"/t/o/{pixel}.gif", f"/t/c/{click}"


@pytest.mark.parametrize("allowed", [None, ["*"]])
def test_a_token_answers_on_its_accounts_domain_and_the_service_host_only(
    client, settings, allowed, django_assert_num_queries
):
    """A's links asked for on B's tracking domain (or any host that is neither) are 404
    and record nothing, whatever ALLOWED_HOSTS admits."""
    if allowed is not None:
        settings.ALLOWED_HOSTS = allowed
    enrollment = sent_enrollment()
    _verified(enrollment.campaign.account, "track.acme.test")
    _verified(AccountFactory(), "b.acme.test")
    pixel, click = _paths(enrollment)

    hosts = ["b.acme.test", "b.acme.test:443"] + (["evil.test"] if allowed else [])
    for host in hosts:
        for path in (pixel, click):
            response = client.get(path, HTTP_HOST=host)
            assert response.status_code == 404, (host, path)
            assert "Location" not in response and response.content != PIXEL_GIF
    enrollment.refresh_from_db()
    assert (enrollment.opened_at, enrollment.clicked_at) == (None, None)

    response = client.get(pixel, HTTP_HOST="track.acme.test")
    assert (response.status_code, response.content) == (200, PIXEL_GIF)
    response = client.get(click, HTTP_HOST="Track.Acme.test")
    assert (response.status_code, response["Location"]) == (302, "https://acme.example/pricing")
    enrollment.refresh_from_db()
    assert enrollment.opened_at is not None and enrollment.clicked_at is not None
    # The service's own host answers every account's tokens (links sent before the domain).
    assert client.get(click).status_code == 302
    assert client.get(pixel).content == PIXEL_GIF
    # So does another of its names that ALLOWED_HOSTS lists (not through a wildcard).
    named = client.get(click, HTTP_HOST="127.0.0.1:8000").status_code
    assert named == (302 if allowed is None else 404)
    # A repeat click on the account's domain: the host's account, the token's, the UPDATE.
    with django_assert_num_queries(3 if allowed is None else 2):
        assert client.get(click, HTTP_HOST="track.acme.test").status_code == 302


def test_a_deleted_enrollments_link_still_leads_on_its_accounts_domain(client):
    enrollment = sent_enrollment()
    _verified(enrollment.campaign.account, "track.acme.test")
    _verified(AccountFactory(), "b.acme.test")
    _, click = _paths(enrollment)
    enrollments_delete(enrollment_ids=[enrollment.pk])
    assert client.get(click, HTTP_HOST="track.acme.test").status_code == 302
    assert client.get(click, HTTP_HOST="b.acme.test").status_code == 404


# --- domains verified before the TXT record was asked for ----------------------------------

LEGACY_TXT = "_outreach-verify.track.acme.test"


def _legacy(zone, account):
    """`account`'s domain, verified by its CNAME alone a day ago or more, before the TXT
    record was asked for (none published), and one of its enrollments sent there."""
    zone.add("track.acme.test", "CNAME", "testserver.")
    Account.objects.filter(pk=account.pk).update(
        tracking_domain="track.acme.test",
        tracking_domain_status="verified",
        tracking_domain_checked_at=timezone.now() - timedelta(hours=25),
    )
    return sent_enrollment(account=account)


def test_a_domain_verified_by_its_cname_alone_stays_verified_and_its_links_answer(
    client, other_client, other_account, dns_server
):
    enrollment = _legacy(dns_server, other_account)
    pixel, click = _paths(enrollment)
    assert tracking_domains_check() == 1
    other_account.refresh_from_db()
    assert other_account.tracking_domain_status == "verified"
    assert other_account.tracking_domain_checked_at > timezone.now() - timedelta(minutes=1)
    assert tracking_base_url(other_account) == "https://track.acme.test"
    response = client.get(click, HTTP_HOST="track.acme.test")
    assert (response.status_code, response["Location"]) == (302, "https://acme.example/pricing")
    response = client.get(pixel, HTTP_HOST="track.acme.test")
    assert (response.status_code, response.content) == (200, PIXEL_GIF)
    enrollment.refresh_from_db()
    assert enrollment.clicked_at is not None and enrollment.opened_at is not None
    # Setting it again takes nothing from anyone: the account keeps it by its CNAME too.
    body = put(other_client, "track.acme.test").json()
    assert (body["domain"], body["status"]) == ("track.acme.test", "verified")


def test_a_verified_domain_whose_cname_is_gone_fails_at_the_daily_check(
    client, other_client, other_account, dns_server
):
    enrollment = _legacy(dns_server, other_account)
    _txt(dns_server, other_account, "track.acme.test")
    dns_server.records.pop("track.acme.test")
    assert tracking_domains_check() == 1
    assert other_client.get("/tracking_domain").json()["status"] == "failed"
    _, click = _paths(enrollment)
    assert client.get(click, HTTP_HOST="track.acme.test").status_code == 400


def test_the_owner_proving_it_takes_over_a_domain_verified_without_the_txt_record(
    client, api_client, account, other_client, other_account, dns_server, settings
):
    """A squatter's old claim, verified by the CNAME alone, cannot block the owner."""
    squatters = _paths(_legacy(dns_server, other_account))
    pixel, click = _paths(sent_enrollment(account=account))
    prove(dns_server, api_client, "track.acme.test")

    body = put(api_client, "track.acme.test").json()
    assert (body["domain"], body["status"]) == ("track.acme.test", "verified")
    assert other_client.get("/tracking_domain").json()["domain"] is None
    other_account.refresh_from_db()
    assert tracking_base_url(other_account) == settings.BASE_URL
    for path in squatters:
        assert client.get(path, HTTP_HOST="track.acme.test").status_code == 404
    assert client.get(squatters[1]).status_code == 302  # on the service's host still
    response = client.get(click, HTTP_HOST="track.acme.test")
    assert (response.status_code, response["Location"]) == (302, "https://acme.example/pricing")
    assert client.get(pixel, HTTP_HOST="track.acme.test").content == PIXEL_GIF
    # And the squatter cannot take it back.
    assert_fields(put(other_client, "track.acme.test"), "domain")


@pytest.mark.parametrize("holders_txt", ["published", "unknown"])
def test_a_verified_domain_stays_its_holders_while_its_txt_record_is_there(
    client, api_client, account, other_account, dns_server, holders_txt
):
    """Both accounts' records at the name, or the holder's lookup failing: 422."""
    _, click = _paths(_legacy(dns_server, other_account))
    prove(dns_server, api_client, "track.acme.test")
    if holders_txt == "published":
        _txt(dns_server, other_account, "track.acme.test")
    else:
        # The server answers this account's question, then fails (SERVFAIL) the holder's.
        record = dns_server.asked

        def asked(request):
            record(request)
            if dns_server.queries.count((LEGACY_TXT, "TXT")) > 1:
                dns_server.servfail(LEGACY_TXT)

        dns_server.asked = asked
    fields = assert_fields(put(api_client, "track.acme.test"), "domain")
    assert "another account's verified tracking domain" in fields["domain"][0]
    assert verification_token(account.pk) in fields["domain"][0]
    assert api_client.get("/tracking_domain").json()["domain"] is None
    other_account.refresh_from_db()
    assert (other_account.tracking_domain, other_account.tracking_domain_status) == (
        "track.acme.test",
        "verified",
    )
    assert client.get(click, HTTP_HOST="track.acme.test").status_code == 302
    if holders_txt == "unknown":
        assert dns_server.queries.count((LEGACY_TXT, "TXT")) == 2
