"""The SSRF guard: at registration, and again on every connection."""

import ipaddress

import pytest

from tests.webhooks.factories import WebhookFactory
from webhooks.events import event_emit
from webhooks.models import DeliveryJob, Webhook, WebhookDelivery
from webhooks.transport import address_refusal

# Made-up event payloads, emitted to exercise the outbox (tests/support/event_schemas.py).
pytestmark = [pytest.mark.django_db, pytest.mark.synthetic_events]

REFUSED = [
    "127.0.0.1",
    "127.1.2.3",
    "10.0.0.1",
    "172.16.5.4",
    "192.168.1.1",
    "169.254.169.254",  # cloud metadata
    "100.64.0.1",  # CGNAT
    "0.0.0.0",  # noqa: S104
    "224.0.0.1",
    "240.0.0.1",
    "255.255.255.255",
    "::1",
    "::",
    "fe80::1",
    "fc00::1",
    "ff02::1",
    "::ffff:127.0.0.1",
    "::ffff:169.254.169.254",
    "64:ff9b::a00:1",  # NAT64 of 10.0.0.1
    "2002:7f00:1::1",  # 6to4 of 127.0.0.1
]
ALLOWED = ["8.8.8.8", "93.184.216.34", "2606:4700:4700::1111", "::ffff:8.8.8.8"]


@pytest.mark.parametrize("address", REFUSED)
def test_internal_addresses_are_refused(address):
    assert address_refusal(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", ALLOWED)
def test_public_addresses_are_allowed(address):
    assert address_refusal(ipaddress.ip_address(address)) is None


@pytest.fixture
def guarded(settings):
    settings.OUTBOUND_ALLOW_PRIVATE_NETWORKS = False


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/hook",
        "https://10.1.2.3/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://100.64.1.1/",
        "http://[::1]:8080/",
        "http://[::ffff:127.0.0.1]/",
        "http://[fe80::1]/",
        "http://0.0.0.0/",
        "http://2130706433/",  # 127.0.0.1 as a decimal integer
        "http://localhost:8000/hook",
        "http://internal.example.test/hook",  # fake_dns: resolves to 127.0.0.1
        "http://mixed.example.test/hook",  # fake_dns: one public, one private address
    ],
)
def test_registration_refuses_internal_destinations(guarded, fake_dns, api_client, url):
    fake_dns.answers["internal.example.test"] = ["127.0.0.1"]
    fake_dns.answers["mixed.example.test"] = ["8.8.8.8,10.0.0.7"]
    response = api_client.post("/webhooks", {"webhook": {"url": url}}, format="json")
    assert response.status_code == 422, response.content
    body = response.json()
    assert body["code"] == "validation_failed"
    assert "Not allowed" in body["details"]["fields"]["webhook.url"][0]
    assert not Webhook.objects.exists()


def test_registration_accepts_a_public_name(guarded, fake_dns, api_client):
    fake_dns.answers["hooks.example.test"] = ["93.184.216.34"]
    response = api_client.post(
        "/webhooks", {"webhook": {"url": "https://hooks.example.test/in"}}, format="json"
    )
    assert response.status_code == 201


def test_patch_refuses_internal_destinations(guarded, api_client, account):
    webhook = WebhookFactory(account=account)
    response = api_client.patch(
        f"/webhooks/{webhook.id}", {"webhook": {"url": "http://127.0.0.1/"}}, format="json"
    )
    assert response.status_code == 422


def test_the_setting_allows_private_networks(settings, api_client):
    settings.OUTBOUND_ALLOW_PRIVATE_NETWORKS = True
    response = api_client.post(
        "/webhooks", {"webhook": {"url": "http://127.0.0.1:9/hook"}}, format="json"
    )
    assert response.status_code == 201


def _emit_and_deliver(account, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        event_emit(account=account, event_type="enrollment.sent", data={})


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "rebound.example.test"])
def test_delivery_refuses_what_resolves_internal_now(
    guarded, fake_dns, account, receiver, django_capture_on_commit_callbacks, host
):
    # Registered while the name looked public (or while the setting allowed it);
    # at delivery time it points inside.
    fake_dns.answers["rebound.example.test"] = ["127.0.0.1"]
    webhook = WebhookFactory(account=account, url=f"http://{host}:{receiver.port}/hook")

    _emit_and_deliver(account, django_capture_on_commit_callbacks)

    (row,) = WebhookDelivery.objects.filter(webhook=webhook)
    assert row.error.startswith(f"refused: {host} resolves to 127.0.0.1, a loopback address")
    assert row.status_code is None and row.delivered_at is None
    assert DeliveryJob.objects.get().state == "failed"  # not retried
    assert receiver.requests == []


def test_delivery_connects_to_the_address_it_checked(
    fake_dns, account, receiver, django_capture_on_commit_callbacks
):
    # A rebinding name: the first lookup says 127.0.0.1 (where the receiver is),
    # later ones 127.0.0.2 (nothing listens there). One lookup, checked, used:
    # the request lands, with the Host header naming the host, not the address.
    fake_dns.answers["rebinding.example.test"] = ["127.0.0.1", "127.0.0.2"]
    webhook = WebhookFactory(
        account=account, url=f"http://rebinding.example.test:{receiver.port}/hook"
    )

    _emit_and_deliver(account, django_capture_on_commit_callbacks)

    (request,) = receiver.wait_for(1)
    assert request.headers["Host"] == f"rebinding.example.test:{receiver.port}"
    assert fake_dns.lookups == ["rebinding.example.test"]
    assert WebhookDelivery.objects.get(webhook=webhook).status_code == 200
