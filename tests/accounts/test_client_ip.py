"""The client's address, the key of every per-address limit (accounts.throttling.client_ip):
X-Forwarded-For is believed only from a connection that comes from one of
TRUSTED_PROXIES, walked from the right."""

import pytest
from django.test import RequestFactory

from accounts import ratelimit
from accounts.throttling import client_ip
from tests.accounts.helpers import assert_envelope
from tests.conftest import client_for
from tests.support.proxy import ReverseProxy, client_session, loopback_addresses_usable

pytestmark = pytest.mark.django_db


def _signup(client, n: int, **extra):
    return client.post("/signup", {"email": f"s{n}@example.com"}, format="json", **extra)


@pytest.fixture
def old_production_layout(settings):
    """A proxy named, and the count the README's production section used to set (which
    then trusted the header from any peer). The service no longer reads the count."""
    settings.TRUSTED_PROXIES = ["10.0.0.0/8"]
    settings.TRUSTED_PROXY_COUNT = 1


ATTACKER = {"REMOTE_ADDR": "203.0.113.50"}  # connects directly, not through the proxy
PROXY = {"REMOTE_ADDR": "10.0.0.1"}


def test_a_bare_x_forwarded_for_cannot_change_the_ip(anon_client, settings):
    assert settings.TRUSTED_PROXIES == []
    for n in range(5):
        assert _signup(anon_client, n, HTTP_X_FORWARDED_FOR=f"198.51.100.{n}").status_code == 201
    response = _signup(anon_client, 5, HTTP_X_FORWARDED_FOR="198.51.100.99")
    assert_envelope(response, 429, "rate_limited")


def test_a_client_connecting_directly_cannot_choose_its_address_for_signups(
    anon_client, old_production_layout
):
    for n in range(5):
        spoofed = f"198.51.100.{n}"
        assert _signup(anon_client, n, HTTP_X_FORWARDED_FOR=spoofed, **ATTACKER).status_code == 201
    response = _signup(anon_client, 5, HTTP_X_FORWARDED_FOR="198.51.100.99", **ATTACKER)
    assert_envelope(response, 429, "rate_limited")


def test_a_client_connecting_directly_cannot_lock_another_address_out(
    anon_client, api_key, old_production_layout
):
    victim = "198.51.100.7"
    for _ in range(ratelimit.AUTH_FAILURE_LIMIT):
        response = anon_client.get(
            "/api_keys",
            HTTP_AUTHORIZATION="Bearer ak_live_wrong",
            HTTP_X_FORWARDED_FOR=victim,
            **ATTACKER,
        )
        assert_envelope(response, 401, "invalid_api_key")
    # The failures counted against the attacker's own address...
    over = anon_client.get("/api_keys", HTTP_AUTHORIZATION="Bearer ak_live_wrong", **ATTACKER)
    assert_envelope(over, 429, "rate_limited")
    # ...not against the one it named, directly or through the proxy.
    victim_client = client_for(api_key.plaintext)
    assert victim_client.get("/api_keys", REMOTE_ADDR=victim).status_code == 200
    assert victim_client.get("/api_keys", HTTP_X_FORWARDED_FOR=victim, **PROXY).status_code == 200


def test_behind_a_trusted_proxy_clients_are_told_apart(anon_client, settings):
    settings.TRUSTED_PROXIES = ["10.0.0.1"]
    for n in range(5):
        forwarded = f"198.51.100.{n}"
        assert _signup(anon_client, n, HTTP_X_FORWARDED_FOR=forwarded, **PROXY).status_code == 201
    assert _signup(anon_client, 5, HTTP_X_FORWARDED_FOR="198.51.100.1", **PROXY).status_code == 201
    # The client prepends made-up entries; the proxy appends the real address.
    for n in range(5):
        spoofed = f"192.0.2.{n}, 198.51.100.9"
        assert (
            _signup(anon_client, 10 + n, HTTP_X_FORWARDED_FOR=spoofed, **PROXY).status_code == 201
        )
    response = _signup(anon_client, 20, HTTP_X_FORWARDED_FOR="192.0.2.200, 198.51.100.9", **PROXY)
    assert_envelope(response, 429, "rate_limited")


@pytest.mark.parametrize(
    "proxies, remote, forwarded, expected",
    [
        ([], "10.0.0.1", "1.1.1.1", "10.0.0.1"),  # no proxy named: never read
        (["10.0.0.1"], "203.0.113.5", "1.1.1.1", "203.0.113.5"),  # the peer is no proxy
        (["10.0.0.1"], "10.0.0.1", "1.1.1.1", "1.1.1.1"),
        (["10.0.0.1"], "10.0.0.1", "6.6.6.6, 1.1.1.1", "1.1.1.1"),  # spoofed on the left
        (["10.0.0.0/8"], "10.0.0.1", "6.6.6.6, 1.1.1.1, 10.0.0.2", "1.1.1.1"),  # two proxies
        (["10.0.0.1", "10.0.0.2"], "10.0.0.1", "6.6.6.6, 10.0.0.2", "6.6.6.6"),
        (["10.0.0.0/8"], "10.0.0.1", "10.0.0.3, 10.0.0.2", "10.0.0.3"),  # all proxies
        (["10.0.0.1"], "10.0.0.1", "", "10.0.0.1"),
        (["10.0.0.1"], "10.0.0.1", "6.6.6.6, not-an-ip", "10.0.0.1"),  # stops at the proxy
        (["10.0.0.0/8"], "10.0.0.1", "6.6.6.6, junk, 10.0.0.2", "10.0.0.2"),
        (["10.0.0.1"], "10.0.0.1", " 2001:db8::1 ", "2001:db8::1"),
        (["2001:db8:ffff::/48"], "2001:db8:ffff::1", "1.1.1.1", "1.1.1.1"),
        (["10.0.0.1"], "::ffff:10.0.0.1", "1.1.1.1", "1.1.1.1"),  # IPv4-mapped peer
        (["10.0.0.1"], "10.0.0.1", "::ffff:1.1.1.1", "1.1.1.1"),
    ],
)
def test_client_ip(settings, proxies, remote, forwarded, expected):
    settings.TRUSTED_PROXIES = proxies
    request = RequestFactory().get("/", REMOTE_ADDR=remote, HTTP_X_FORWARDED_FOR=forwarded)
    assert client_ip(request) == expected


# A real proxy on loopback: it appends the peer it saw to the client's X-Forwarded-For and
# connects to the service from an address of its own.
PROXY_ADDRESS, ALICE, MALLORY = "127.0.0.2", "127.0.0.3", "127.0.0.4"


@pytest.fixture
def real_proxy(live_server, live_db, settings):
    if not loopback_addresses_usable(PROXY_ADDRESS, ALICE, MALLORY):
        pytest.skip("needs 127.0.0.2-4 on loopback (Linux routes all of 127.0.0.0/8)")
    settings.TRUSTED_PROXIES = [PROXY_ADDRESS]
    upstream = f"http://127.0.0.1:{live_server.thread.port}"
    with ReverseProxy(upstream=upstream, source=PROXY_ADDRESS) as proxy:
        yield proxy


def test_behind_a_real_proxy_the_peer_it_saw_counts_not_the_spoofed_entry(real_proxy):
    mallory, alice = client_session(MALLORY), client_session(ALICE)

    def signup(session, email: str, spoofed: str | None = None):
        headers = {"X-Forwarded-For": spoofed} if spoofed else {}
        return session.post(
            f"{real_proxy.url}/signup", json={"email": email}, headers=headers, timeout=30
        )

    for n in range(5):
        response = signup(mallory, f"m{n}@example.com", spoofed=f"198.51.100.{n}")
        assert response.status_code == 201, response.text
    response = signup(mallory, "m5@example.com", spoofed="198.51.100.99")
    assert response.status_code == 429, response.text
    assert response.json()["code"] == "rate_limited"
    # Another machine behind the same proxy is not the proxy: it has its own limit.
    assert signup(alice, "a0@example.com").status_code == 201


def test_behind_a_real_proxy_a_spoofed_address_cannot_be_locked_out(real_proxy, api_key):
    mallory, alice = client_session(MALLORY), client_session(ALICE)
    wrong = {"Authorization": "Bearer ak_live_wrong", "X-Forwarded-For": ALICE}
    for _ in range(ratelimit.AUTH_FAILURE_LIMIT):
        assert (
            mallory.get(f"{real_proxy.url}/api_keys", headers=wrong, timeout=30).status_code == 401
        )
    assert mallory.get(f"{real_proxy.url}/api_keys", headers=wrong, timeout=30).status_code == 429
    good = {"Authorization": f"Bearer {api_key.plaintext}"}
    assert alice.get(f"{real_proxy.url}/api_keys", headers=good, timeout=30).status_code == 200
