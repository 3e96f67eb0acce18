import logging
import time

import pytest

from accounts import ratelimit
from accounts.models import RateLimitBucket
from accounts.ratelimit import rate_limit_hit
from accounts.services import api_key_create
from accounts.throttling import client_ip_bucket
from tests.accounts.factories import AccountFactory
from tests.accounts.helpers import assert_envelope
from tests.conftest import client_for

pytestmark = pytest.mark.django_db


@pytest.fixture(params=["sql", "redis"])
def limiter(request, settings, monkeypatch):
    """Run the test against each rate-limit store."""
    if request.param == "redis":
        settings.REDIS_URL = request.getfixturevalue("redis_url")
        # Whatever an earlier test left: this one counts on Redis from its first hit.
        monkeypatch.setattr(ratelimit, "_redis_unavailable_until", 0.0)
    else:
        settings.REDIS_URL = ""
    return request.param


def test_the_61st_request_in_a_minute_is_rate_limited(limiter, api_client):
    for n in range(60):
        response = api_client.get("/api_keys")
        assert response.status_code == 200, n
        assert response["RateLimit-Policy"] == '"api_key";q=60;w=60'
        assert response["RateLimit"].startswith(f'"api_key";r={59 - n};t=')
    response = api_client.get("/api_keys")
    body = assert_envelope(response, 429, "rate_limited")
    assert body["details"] == {"limit": 60, "period": 60}
    retry_after = int(response["Retry-After"])
    assert 1 <= retry_after <= 60
    assert response["RateLimit"] == f'"api_key";r=0;t={retry_after}'


def test_every_method_counts_and_keys_are_limited_separately(limiter, api_client, account):
    for _ in range(30):
        api_client.get("/api_keys")
        api_client.post("/api_keys", {"label": ""}, format="json")  # 422s count too.
    assert_envelope(api_client.get("/api_keys"), 429, "rate_limited")
    other = api_key_create(account=account, label="other")
    assert client_for(other.plaintext).get("/api_keys").status_code == 200


def test_the_keys_of_an_account_share_its_limit(limiter, api_client, account, settings):
    settings.API_ACCOUNT_RATE_LIMIT = 6
    clients = [api_client] + [
        client_for(api_key_create(account=account, label=f"k{n}").plaintext) for n in range(2)
    ]
    for n in range(6):  # two requests on each key: each far below its own 60
        assert clients[n % 3].get("/api_keys").status_code == 200, n
    response = clients[0].get("/api_keys")
    body = assert_envelope(response, 429, "rate_limited")
    assert body["details"] == {"limit": 6, "period": 60}
    retry_after = int(response["Retry-After"])
    assert 1 <= retry_after <= 60
    assert response["RateLimit-Policy"] == '"account";q=6;w=60'
    assert response["RateLimit"] == f'"account";r=0;t={retry_after}'
    # A new key is no fresh allowance; another account is not affected.
    fresh = client_for(api_key_create(account=account, label="fresh").plaintext)
    assert_envelope(fresh.get("/api_keys"), 429, "rate_limited")
    other = api_key_create(account=AccountFactory(), label="other")
    assert client_for(other.plaintext).get("/api_keys").status_code == 200


def test_unauthenticated_requests_are_not_limited_per_key(limiter, anon_client):
    response = anon_client.get("/api_keys")
    assert response.status_code == 401
    assert "RateLimit" not in response
    assert anon_client.get("/plans").status_code == 200


def test_a_new_window_starts_when_the_old_one_ends(limiter, settings, monkeypatch):
    bucket = f"{settings.RATE_LIMIT_KEY_PREFIX}:test:window"
    for _ in range(3):
        rate_limit_hit(policy="test", identity="window", limit=2, period=60)
    assert not rate_limit_hit(policy="test", identity="window", limit=2, period=60).allowed
    if limiter == "redis":
        client = ratelimit._redis(settings.REDIS_URL)
        client.pexpire(bucket, 1)
        for _ in range(200):  # Poll until Redis expired the window.
            if not client.exists(bucket):
                break
            time.sleep(0.005)
    else:
        RateLimitBucket.objects.filter(bucket=bucket).update(window_started_ms=0)
    fresh = rate_limit_hit(policy="test", identity="window", limit=2, period=60)
    assert (fresh.count, fresh.allowed, fresh.remaining) == (1, True, 1)
    assert 59 <= fresh.reset_after <= 60


def test_sql_buckets_keep_one_row_and_prune_spent_ones(settings):
    settings.REDIS_URL = ""
    for _ in range(5):
        rate_limit_hit(policy="test", identity="rows", limit=10, period=60)
    assert RateLimitBucket.objects.get().count == 5
    assert ratelimit.rate_limit_buckets_prune() == 0
    RateLimitBucket.objects.update(window_started_ms=0)
    assert ratelimit.rate_limit_buckets_prune() == 1
    assert not RateLimitBucket.objects.exists()


def test_unreachable_redis_falls_back_to_the_database_store(
    settings, api_client, caplog, monkeypatch
):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    monkeypatch.setattr(ratelimit, "_redis_unavailable_until", 0.0)
    attempts = []
    real_hit = ratelimit._hit_redis
    monkeypatch.setattr(
        ratelimit, "_hit_redis", lambda *args: attempts.append(args) or real_hit(*args)
    )
    with caplog.at_level(logging.WARNING, logger="accounts.ratelimit"):
        for n in range(60):
            response = api_client.get("/api_keys")
            assert response.status_code == 200, n
            assert response["RateLimit"].startswith(f'"api_key";r={59 - n};t=')
        body = assert_envelope(api_client.get("/api_keys"), 429, "rate_limited")
    assert body["details"] == {"limit": 60, "period": 60}
    # One attempt at Redis, then the database counts until the retry delay passes.
    assert len(attempts) == 1
    assert caplog.text.count("redis unavailable") == 1
    assert RateLimitBucket.objects.get(bucket__contains=":api_key:").count == 61

    monkeypatch.setattr(ratelimit, "_redis_unavailable_until", 0.0)  # the delay is over
    api_client.get("/api_keys")
    assert len(attempts) == 2


# Signups: 5 an hour per client IP (SIGNUP_RATE_LIMIT, production's default).


def _signup(client, n: int, **extra):
    return client.post("/signup", {"email": f"s{n}@example.com"}, format="json", **extra)


def test_the_sixth_signup_from_one_ip_in_an_hour_is_rate_limited(limiter, anon_client):
    for n in range(5):
        response = _signup(anon_client, n, REMOTE_ADDR="203.0.113.7")
        assert response.status_code == 201
        assert response["RateLimit-Policy"] == '"signup";q=5;w=3600'
    response = _signup(anon_client, 5, REMOTE_ADDR="203.0.113.7")
    body = assert_envelope(response, 429, "rate_limited")
    assert body["details"] == {"limit": 5, "period": 3600}
    assert 1 <= int(response["Retry-After"]) <= 3600
    assert _signup(anon_client, 6, REMOTE_ADDR="203.0.113.8").status_code == 201


def test_the_signup_limit_is_the_setting(limiter, anon_client, settings):
    # The embedded (development) mode raises it; SIGNUP_RATE_LIMIT sets it in any mode.
    settings.SIGNUP_RATE_LIMIT = 8
    for n in range(8):
        response = _signup(anon_client, n, REMOTE_ADDR="203.0.113.9")
        assert response.status_code == 201
        assert response["RateLimit-Policy"] == '"signup";q=8;w=3600'
    body = assert_envelope(_signup(anon_client, 8, REMOTE_ADDR="203.0.113.9"), 429, "rate_limited")
    assert body["details"] == {"limit": 8, "period": 3600}


def test_failed_signups_count_too(anon_client):
    for _ in range(5):
        assert anon_client.post("/signup", {}, format="json").status_code == 422
    assert_envelope(_signup(anon_client, 0), 429, "rate_limited")


# The client's address behind proxies: tests/accounts/test_client_ip.py.


def test_ipv6_clients_share_a_bucket_per_64():
    assert client_ip_bucket("2001:db8:1:2::1") == client_ip_bucket("2001:db8:1:2:ffff::9")
    assert client_ip_bucket("2001:db8:1:2::1") != client_ip_bucket("2001:db8:1:3::1")
    assert client_ip_bucket("::ffff:192.0.2.1") == "192.0.2.1"
    assert client_ip_bucket("203.0.113.1") == "203.0.113.1"
