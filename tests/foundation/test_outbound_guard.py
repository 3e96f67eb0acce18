"""The outbound guard (config/outbound.py, docs/outbound.md) for every refused range,
at create, update and connect time, for webhooks, SMTP and IMAP.

Names are made up (fake_dns) and point at each range; nothing is ever connected to
an internal address: `connect_attempts` proves no connect was even tried.
"""

import ipaddress
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from config.outbound import address_refusal, http_url_parts
from outreach.intake.mailbox import mailbox_poll
from outreach.models.campaigns import Campaign
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Enrollment, Message
from outreach.sending.scheduler import schedule_due
from outreach.sending.send import batch_send
from tests.outreach.factories import (
    CampaignFactory,
    ContactFactory,
    CredentialFactory,
    EnrollmentFactory,
)
from tests.webhooks.factories import WebhookFactory
from webhooks.events import event_emit
from webhooks.models import DeliveryJob, Webhook, WebhookDelivery

# Made-up event payloads, emitted to exercise the outbox (tests/support/event_schemas.py).
pytestmark = [pytest.mark.django_db, pytest.mark.synthetic_events]

NOW = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)  # a Monday


def _v6(address: str) -> str:
    """How this Python writes an IPv6 address (IPv4-mapped ones differ by version)."""
    return str(ipaddress.ip_address(address))


# One address in every refused range, with the reason the guard gives.
REFUSED = [
    ("127.0.0.1", "loopback"),
    ("127.200.0.9", "loopback"),
    ("::1", "loopback"),
    ("10.0.0.1", "private"),
    ("172.16.0.1", "private"),
    ("172.31.255.254", "private"),
    ("192.168.1.1", "private"),
    ("100.64.0.1", "shared (100.64/10)"),
    ("100.127.255.254", "shared (100.64/10)"),
    ("169.254.169.254", "link-local"),
    ("fe80::1", "link-local"),
    ("fec0::1", "site-local"),
    ("feff::1", "site-local"),
    ("fc00::1", "unique-local"),
    ("fd12:3456::1", "unique-local"),
    ("224.0.0.1", "multicast"),
    ("239.255.255.250", "multicast"),
    ("ff02::1", "multicast"),
    ("0.0.0.0", "unspecified"),  # noqa: S104
    ("::", "unspecified"),
    ("0.1.2.3", "this-network"),
    ("192.0.0.8", "IETF protocol assignment"),
    ("192.0.0.170", "IETF protocol assignment"),
    ("2001::1", "IETF protocol assignment"),
    ("192.0.2.1", "documentation"),
    ("198.51.100.1", "documentation"),
    ("203.0.113.1", "documentation"),
    ("2001:db8::1", "documentation"),
    ("198.18.0.1", "benchmarking"),
    ("240.0.0.1", "reserved"),
    ("255.255.255.255", "reserved"),
    ("192.88.99.1", "reserved"),
    ("::7f00:1", "reserved"),  # IPv4-compatible 127.0.0.1
    ("100::1", "reserved"),
    ("64:ff9b:1::a00:1", "reserved"),
    ("4000::1", "reserved"),  # outside global unicast 2000::/3
    # IPv4-mapped, NAT64 and 6to4 forms of refused IPv4 addresses. An IPv4-mapped
    # address reads ::ffff:7f00:1 up to Python 3.12 and ::ffff:127.0.0.1 from 3.13 on.
    ("::ffff:127.0.0.1", f"loopback (as {_v6('::ffff:127.0.0.1')})"),
    ("::ffff:10.0.0.1", f"private (as {_v6('::ffff:10.0.0.1')})"),
    ("::ffff:169.254.169.254", f"link-local (as {_v6('::ffff:169.254.169.254')})"),
    ("::ffff:100.64.0.1", f"shared (100.64/10) (as {_v6('::ffff:100.64.0.1')})"),
    ("::ffff:192.0.0.8", f"IETF protocol assignment (as {_v6('::ffff:192.0.0.8')})"),
    ("64:ff9b::a9fe:a9fe", "link-local (as 64:ff9b::a9fe:a9fe)"),
    ("64:ff9b::a00:1", "private (as 64:ff9b::a00:1)"),
    ("2002:7f00:1::1", "loopback (as 2002:7f00:1::1)"),
]
ALLOWED = [
    "8.8.8.8",
    "93.184.216.34",
    "1.1.1.1",
    "2606:4700:4700::1111",
    "::ffff:8.8.8.8",
    "64:ff9b::808:808",  # NAT64 of 8.8.8.8
    "2002:808:808::1",  # 6to4 of 8.8.8.8
]
# One address per reason (each range, each mapped form) for the API and connect tests.
SAMPLES = list({reason: address for address, reason in reversed(REFUSED)}.values())
INSIDE = "inside.example.test"


@pytest.fixture
def guarded(settings):
    settings.OUTBOUND_ALLOW_PRIVATE_NETWORKS = False


@pytest.fixture
def inside(fake_dns):
    """`inside.example.test` resolving to the address given: inside(address)."""

    def point(address: str) -> str:
        fake_dns.answers[INSIDE] = [address]
        return INSIDE

    return point


# --- the ranges --------------------------------------------------------------------------


@pytest.mark.parametrize(("address", "reason"), REFUSED)
def test_every_internal_range_is_refused_with_its_reason(address, reason):
    assert address_refusal(ipaddress.ip_address(address)) == reason


@pytest.mark.parametrize("address", ALLOWED)
def test_public_addresses_are_allowed(address):
    assert address_refusal(ipaddress.ip_address(address)) is None


def test_a_scoped_ipv6_address_is_refused():
    assert address_refusal(ipaddress.ip_address("2606:4700::1%eth0")) == "scoped (zone-bound)"


def test_the_samples_cover_every_range():
    from config.outbound import REFUSED_NETWORKS

    labels = {label for _, label in REFUSED_NETWORKS}
    sampled = {address_refusal(ipaddress.ip_address(a)) for a in SAMPLES}
    assert labels <= sampled
    assert any("(as " in reason for reason in sampled)


# --- URLs the validator and the HTTP client read alike --------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:80\\@hooks.example.test/",  # urlsplit: hooks..., urllib3: 127.0.0.1
        "http://user:pw@hooks.example.test/",
        "http://%31%32%37.0.0.1/",
        "http://hooks.example.test\t/",
        "http://hooks.example.test\x00/",
        "http://[fe80::1%25eth0]/",
        "ftp://hooks.example.test/",
        "http:///path",
    ],
)
def test_urls_read_two_ways_are_refused(url):
    with pytest.raises(ValueError):
        http_url_parts(url)


@pytest.mark.parametrize("allowed", [True, False])
def test_a_url_read_two_ways_is_refused_at_registration(settings, api_client, allowed):
    settings.OUTBOUND_ALLOW_PRIVATE_NETWORKS = allowed
    url = "http://127.0.0.1:8000\\@hooks.example.test/"
    response = api_client.post("/webhooks", {"webhook": {"url": url}}, format="json")
    assert response.status_code == 422
    assert response.json()["details"]["fields"]["webhook.url"] == [
        "Enter a valid URL (no spaces, backslashes or control characters)."
    ]
    assert not Webhook.objects.exists()


def test_urls_are_read_as_the_client_reads_them():
    assert http_url_parts("https://Hooks.Example.test:8443/in?x=1") == (
        "https",
        "hooks.example.test",
        8443,
    )
    assert http_url_parts("http://[2606:4700::1]/") == ("http", "2606:4700::1", 80)
    assert http_url_parts("http://bücher.example/") == ("http", "xn--bcher-kva.example", 80)


# --- at create and update ------------------------------------------------------------------


def _create(client, kind: str, host: str):
    if kind == "webhook":
        url_host = f"[{host}]" if ":" in host else host
        return client.post(
            "/webhooks", {"webhook": {"url": f"https://{url_host}/hook"}}, format="json"
        )
    body = {
        "from_email": "sales@example.com",
        "smtp_host": "smtp.example.com",
        "smtp_username": "sales@example.com",
        "smtp_password": "pw",
    }
    if kind == "smtp":
        body["smtp_host"] = host
    else:
        body.update(imap_host=host, imap_username="sales", imap_password="pw")
    return client.post("/smtp_credentials", body, format="json")


def _update(client, kind: str, account, host: str):
    if kind == "webhook":
        webhook = WebhookFactory(account=account, url="https://hooks.example.com/in")
        url_host = f"[{host}]" if ":" in host else host
        return webhook, client.patch(
            f"/webhooks/{webhook.pk}", {"webhook": {"url": f"https://{url_host}/"}}, format="json"
        )
    credential = CredentialFactory(
        account=account, imap_host="imap.example.com", imap_username="u", imap_password="p"
    )
    field = "smtp_host" if kind == "smtp" else "imap_host"
    return credential, client.patch(
        f"/smtp_credentials/{credential.pk}", {field: host}, format="json"
    )


FIELD = {"webhook": "webhook.url", "smtp": "smtp_host", "imap": "imap_host"}


def _assert_refused(response, kind: str, host: str, address: str):
    assert response.status_code == 422, response.content
    body = response.json()
    assert body["code"] == "validation_failed"
    (message,) = body["details"]["fields"][FIELD[kind]]
    reason = address_refusal(ipaddress.ip_address(address))
    assert message.startswith(f"Not allowed: {host} resolves to {ipaddress.ip_address(address)}")
    assert f"a {reason} address" in message


@pytest.mark.parametrize("kind", ["webhook", "smtp", "imap"])
@pytest.mark.parametrize("address", SAMPLES)
def test_create_refuses_a_name_resolving_to_every_range(guarded, inside, api_client, kind, address):
    host = inside(address)
    _assert_refused(_create(api_client, kind, host), kind, host, address)
    assert not Webhook.objects.exists()
    assert not SmtpCredential.objects.exists()


@pytest.mark.parametrize("kind", ["webhook", "smtp", "imap"])
@pytest.mark.parametrize(
    "address", ["127.0.0.1", "10.0.0.1", "169.254.169.254", "fec0::1", "192.0.0.8", "::1"]
)
def test_create_refuses_an_internal_address_written_as_is(guarded, api_client, kind, address):
    _assert_refused(_create(api_client, kind, address), kind, address, address)


@pytest.mark.parametrize("kind", ["smtp", "imap"])
@pytest.mark.parametrize("host", ["2130706433", "0x7f.1", "localhost"])
def test_create_refuses_other_spellings_of_loopback(guarded, api_client, kind, host):
    response = _create(api_client, kind, host)
    assert response.status_code == 422
    assert "a loopback address" in response.json()["details"]["fields"][FIELD[kind]][0]


@pytest.mark.parametrize("kind", ["webhook", "smtp", "imap"])
@pytest.mark.parametrize("address", SAMPLES)
def test_update_refuses_a_name_resolving_to_every_range(
    guarded, inside, api_client, account, kind, address
):
    host = inside(address)
    row, response = _update(api_client, kind, account, host)
    _assert_refused(response, kind, host, address)
    before = {f.attname: getattr(row, f.attname) for f in row._meta.concrete_fields}
    row.refresh_from_db()
    assert {f.attname: getattr(row, f.attname) for f in row._meta.concrete_fields} == before


def test_a_name_with_one_internal_address_among_public_ones_is_refused(
    guarded, fake_dns, api_client
):
    fake_dns.answers["mixed.example.test"] = ["93.184.216.34,10.0.0.7"]
    response = _create(api_client, "smtp", "mixed.example.test")
    _assert_refused(response, "smtp", "mixed.example.test", "10.0.0.7")


@pytest.mark.parametrize("kind", ["smtp", "imap"])
def test_a_public_mailbox_server_is_accepted(guarded, fake_dns, api_client, kind):
    fake_dns.answers["Mail.Example.test"] = ["93.184.216.34"]
    fake_dns.answers["mail.example.test"] = ["93.184.216.34"]
    response = _create(api_client, kind, "Mail.Example.test")
    assert response.status_code == 201, response.content
    assert response.json()[FIELD[kind]] == "mail.example.test"


@pytest.mark.parametrize("kind", ["smtp", "imap"])
def test_a_mailbox_server_that_does_not_resolve_yet_is_accepted(guarded, api_client, kind):
    # Whether it resolves is the connect's business (recorded on the mailbox then).
    response = _create(api_client, kind, "not-yet.invalid")
    assert response.status_code == 201, response.content


@pytest.mark.parametrize("kind", ["smtp", "imap"])
@pytest.mark.parametrize(
    "host",
    ["smtp.example.com:587", "smtp://smtp.example.com", "smtp example.com", "a\x00b", "-bad-"],
)
def test_a_mailbox_host_must_be_a_host(api_client, kind, host):
    response = _create(api_client, kind, host)
    assert response.status_code == 422
    (message,) = response.json()["details"]["fields"][FIELD[kind]]
    assert message.startswith("Enter a host name or an IP address") or (
        message == "Null characters are not allowed."
    )


@pytest.mark.parametrize("kind", ["webhook", "smtp", "imap"])
def test_the_setting_lets_private_networks_through(settings, api_client, kind):
    settings.OUTBOUND_ALLOW_PRIVATE_NETWORKS = True
    assert _create(api_client, kind, "127.0.0.1").status_code == 201


# --- at connect time -----------------------------------------------------------------------


@pytest.mark.parametrize("address", SAMPLES)
def test_a_webhook_delivery_to_every_range_is_refused(
    guarded, inside, connect_attempts, account, django_capture_on_commit_callbacks, address
):
    # Registered while the name was public (or the setting allowed it); now it is inside.
    webhook = WebhookFactory(account=account, url=f"http://{inside(address)}:8080/hook")
    with django_capture_on_commit_callbacks(execute=True):
        event_emit(account=account, event_type="enrollment.sent", data={})

    (row,) = WebhookDelivery.objects.filter(webhook=webhook)
    ip = ipaddress.ip_address(address)
    assert row.error == (f"refused: {INSIDE} resolves to {ip}, a {address_refusal(ip)} address")
    assert (row.status_code, row.delivered_at) == (None, None)
    assert DeliveryJob.objects.get().state == "failed"  # not retried
    assert connect_attempts == []


def _scheduled_send(host: str) -> tuple[SmtpCredential, Enrollment]:
    campaign = CampaignFactory(status=Campaign.Status.ACTIVE)
    credential = campaign.credentials.get()
    SmtpCredential.objects.filter(pk=credential.pk).update(smtp_host=host, smtp_port=587)
    enrollment = EnrollmentFactory(
        campaign=campaign,
        contact=ContactFactory(account=campaign.account),
        status=Enrollment.Status.SCHEDULED,
        next_send_at=NOW,
        dispatched_at=NOW,
    )
    return credential, enrollment


@pytest.mark.parametrize("security", ["starttls", "ssl"])
@pytest.mark.parametrize("address", SAMPLES)
def test_an_smtp_connect_to_every_range_is_a_mailbox_failure(
    guarded, inside, connect_attempts, settings, address, security
):
    settings.SENDING_CREDENTIAL_RETRY_SECONDS = 900
    credential, enrollment = _scheduled_send(inside(address))
    SmtpCredential.objects.filter(pk=credential.pk).update(smtp_security=security)

    [batch] = schedule_due(now=NOW)
    result = batch_send(
        batch_id=batch.batch_id, credential_id=batch.credential_id, clock=lambda: NOW
    )

    ip = ipaddress.ip_address(address)
    error = f"refused: {INSIDE} resolves to {ip}, a {address_refusal(ip)} address"
    assert (result.sent, result.bounced, result.mailbox_error) == (0, 0, error)
    credential.refresh_from_db()
    assert (credential.last_error, credential.last_error_at) == (error, NOW)
    assert (credential.bounced_count, credential.disabled_at) == (0, None)
    enrollment.refresh_from_db()
    # The batch waits as for any mailbox failure: no attempt counted, never a bounce.
    assert (enrollment.status, enrollment.send_attempts, enrollment.bounce_reason) == (
        "scheduled",
        0,
        None,
    )
    assert enrollment.next_send_at == NOW + timedelta(seconds=900)
    assert not Message.objects.exists()
    assert connect_attempts == []


@pytest.mark.parametrize("security", ["ssl", "starttls", "none"])
@pytest.mark.parametrize("address", SAMPLES)
def test_an_imap_poll_of_every_range_is_refused(
    guarded, inside, connect_attempts, address, security
):
    credential = CredentialFactory(
        imap_host=inside(address),
        imap_port=993,
        imap_security=security,
        imap_username="u",
        imap_password="p",
    )

    result = mailbox_poll(credential=credential)

    ip = ipaddress.ip_address(address)
    error = f"refused: {INSIDE} resolves to {ip}, a {address_refusal(ip)} address"
    assert result.error == error
    credential.refresh_from_db()
    assert credential.imap_last_error == error
    assert credential.imap_last_error_at is not None
    assert connect_attempts == []


def test_the_smtp_connect_goes_to_the_address_it_checked(smtp_sink, fake_dns, connect_attempts):
    # A rebinding name: the first lookup says 127.0.0.1 (where the sink listens), later
    # ones 127.0.0.2. One lookup, checked, connected to; the mail lands.
    sink = smtp_sink()
    connect_attempts.clear()  # the sink's own start-up check
    fake_dns.answers["rebinding.example.test"] = ["127.0.0.1", "127.0.0.2"]
    credential, _ = _scheduled_send("rebinding.example.test")
    SmtpCredential.objects.filter(pk=credential.pk).update(
        smtp_port=sink.port, smtp_security="none", smtp_username="", smtp_password=""
    )
    [batch] = schedule_due(now=NOW)
    result = batch_send(
        batch_id=batch.batch_id, credential_id=batch.credential_id, clock=lambda: NOW
    )
    assert result.sent == 1
    assert len(sink.messages) == 1
    assert fake_dns.lookups == ["rebinding.example.test"]
    assert connect_attempts == [("127.0.0.1", sink.port)]


def test_a_server_reply_stays_readable_and_bounded(smtp_sink, settings):
    # A server the mailbox may reach answers with a long refusal: its code and text are
    # what the owner sees, cut at 1000 characters.
    sink = smtp_sink(username="mailbox", password="right")
    credential, _ = _scheduled_send("127.0.0.1")
    SmtpCredential.objects.filter(pk=credential.pk).update(
        smtp_port=sink.port, smtp_security="none", smtp_username="mailbox", smtp_password="x"
    )
    [batch] = schedule_due(now=NOW)
    batch_send(batch_id=batch.batch_id, credential_id=batch.credential_id, clock=lambda: NOW)
    credential.refresh_from_db()
    assert credential.last_error.startswith("authentication failed: 535")
    assert len(credential.last_error) <= 1000


# --- the setting ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "allowed", "announced"),
    [
        ({}, True, True),  # embedded: on, and said at start
        ({"OUTBOUND_ALLOW_PRIVATE_NETWORKS": "false"}, False, False),
        ({"DATABASE_URL": "postgres://u@db/x"}, False, False),  # production: off
        (
            {"DATABASE_URL": "postgres://u@db/x", "WEBHOOK_ALLOW_PRIVATE_NETWORKS": "true"},
            True,
            False,
        ),
        (
            {"DATABASE_URL": "postgres://u@db/x", "OUTBOUND_ALLOW_PRIVATE_NETWORKS": "true"},
            True,
            False,
        ),
    ],
)
def test_the_setting_by_mode_and_by_its_old_name(tmp_path, env, allowed, announced):
    clean = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "DATABASE_URL",
            "REDIS_URL",
            "OUTBOUND_ALLOW_PRIVATE_NETWORKS",
            "WEBHOOK_ALLOW_PRIVATE_NETWORKS",
            "DJANGO_SETTINGS_MODULE",
        )
    }
    clean.update(
        VAR_DIR=str(tmp_path),
        SECRET_KEY="x" * 50,
        FIELD_ENCRYPTION_KEY="dGVzdC1vbmx5LWZpZWxkLWtleS0wMDAwMDAwMDAwMDA=",
        DJANGO_SETTINGS_MODULE="config.settings",
        **env,
    )
    code = (
        "import django; django.setup(); from django.conf import settings; "
        "print(settings.OUTBOUND_ALLOW_PRIVATE_NETWORKS)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=clean,
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(allowed)
    assert ("OUTBOUND_ALLOW_PRIVATE_NETWORKS is on" in done.stderr) == announced
