"""GET/PUT /tracking_domain, its CNAME verification against a real DNS server, beat's
re-check, the pixel of sent emails on the verified host, and requests for that host."""

from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.models import Account
from outreach.campaigns.tracking import tracking_base_url
from outreach.domains.beat import tracking_domains_check
from outreach.models.campaigns import CampaignStep
from outreach.sending import tokens
from tests.accounts.factories import AccountFactory
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


def test_none_at_first(api_client):
    assert api_client.get("/tracking_domain").json() == {
        "domain": None,
        "status": None,
        "checked_at": None,
        "cname_target": "testserver",
    }


def test_a_cname_to_the_service_is_verified_and_used(api_client, account, zone):
    response = put(api_client, "Track.Acme.test.")
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["domain"], body["status"]) == ("track.acme.test", "verified")
    assert body["checked_at"] is not None
    assert api_client.get("/tracking_domain").json() == body
    account.refresh_from_db()
    assert tracking_base_url(account) == "https://track.acme.test"


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


def test_another_accounts_domain_is_refused(api_client, other_client, zone):
    assert put(other_client, "track.acme.test").json()["status"] == "verified"
    assert_fields(put(api_client, "track.acme.test"), "domain")


def test_needs_a_key(anon_client):
    assert anon_client.get("/tracking_domain").status_code == 401
    assert anon_client.put("/tracking_domain", {"domain": "x.acme.test"}).status_code == 401


def test_beat_checks_again(zone):
    now = timezone.now()
    pending = AccountFactory(tracking_domain="track.acme.test", tracking_domain_status="pending")
    gone = AccountFactory(
        tracking_domain="elsewhere.acme.test",
        tracking_domain_status="verified",
        tracking_domain_checked_at=now - timedelta(hours=25),
    )
    recent = AccountFactory(
        tracking_domain="plain.acme.test",
        tracking_domain_status="verified",
        tracking_domain_checked_at=now - timedelta(hours=1),
    )
    unknown = AccountFactory(tracking_domain="slow.acme.test", tracking_domain_status="failed")
    AccountFactory()
    assert tracking_domains_check() == 3
    status = dict(Account.objects.values_list("pk", "tracking_domain_status"))
    assert status[pending.pk] == "verified"
    assert status[gone.pk] == "failed"  # its CNAME moved away: no longer used
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
    pixel = tokens.token_make(purpose=tokens.OPEN, enrollment_id=enrollment.pk)
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
