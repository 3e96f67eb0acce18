"""DRF throttles: 60 requests a minute per API key and API_ACCOUNT_RATE_LIMIT per
account on every authenticated request (the global default), SIGNUP_RATE_LIMIT signups
an hour per client IP (5 in production).

Each throttle keeps its decision (`decision`); the views' base
(config.api.viewsets.RateLimitHeadersMixin) turns it into the IETF
RateLimit-Policy / RateLimit headers, on 429s and successes alike. A 429 carries the
headers of the limit it is for (RateLimited.headers), so the failed-authentication
limit, checked before any throttle runs, sends them too.
"""

import functools
import ipaddress
from typing import TypedDict

from django.conf import settings
from rest_framework.throttling import BaseThrottle

from accounts import ratelimit
from accounts.models import ApiKey
from accounts.ratelimit import (
    API_KEY_LIMIT,
    API_KEY_PERIOD,
    SIGNUP_PERIOD,
    VERIFICATION_EMAIL_LIMIT,
    VERIFICATION_EMAIL_PERIOD,
    Limit,
    RateLimitDecision,
    rate_limit_hit,
    rate_limit_hits,
    rate_limit_over,
)
from config.api.errors import RateLimited

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


@functools.lru_cache(maxsize=8)
def _proxy_networks(proxies: tuple[str, ...]) -> tuple[IPNetwork, ...]:
    """settings.TRUSTED_PROXIES parsed (the settings checked each entry at start)."""
    return tuple(ipaddress.ip_network(proxy, strict=False) for proxy in proxies)


def _address(text: str) -> IPAddress | None:
    """An address as the service compares it: IPv4-mapped IPv6 as its IPv4 address."""
    try:
        address = ipaddress.ip_address(text.strip())
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def client_ip(request) -> str:
    """The client's address: the one rule for every limit keyed by address (signups,
    failed API authentications, admin login lockouts).

    REMOTE_ADDR, unless the connection comes from one of settings.TRUSTED_PROXIES.
    Then X-Forwarded-For is walked from the right: each proxy appends the address it
    received the request from, so entries that are trusted proxies are skipped and the
    first one that is not is the client. Whatever the client wrote into the header
    itself sits further left and is never reached. A malformed entry stops the walk
    at the last address a trusted proxy vouched for; a header of nothing but trusted
    proxies gives its leftmost entry.
    """
    remote = request.META.get("REMOTE_ADDR", "")
    proxies = _proxy_networks(tuple(settings.TRUSTED_PROXIES))
    hop = _address(remote)
    if not proxies or hop is None or not any(hop in network for network in proxies):
        return remote
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")
    for entry in reversed(forwarded):
        address = _address(entry)
        if address is None:
            break
        hop = address
        if not any(hop in network for network in proxies):
            break
    return str(hop)


def client_ip_bucket(ip: str) -> str:
    """IPv6 clients are limited per /64 (one host usually owns a whole /64)."""
    try:
        address = ipaddress.ip_address(ip)
    except ValueError:
        return ip or "unknown"
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network(f"{address}/64", strict=False))
    return str(address)


def _rate_limited(decision: RateLimitDecision) -> RateLimited:
    return RateLimited(
        limit=decision.limit,
        period=decision.period,
        retry_after=decision.reset_after,
        headers=decision.headers(),
    )


class _DecidingThrottle(BaseThrottle):
    """A throttle that keeps its decision for the response's headers."""

    decision: RateLimitDecision | None = None

    def _enforce(self, decision: RateLimitDecision) -> bool:
        self.decision = decision
        if not decision.allowed:
            raise _rate_limited(decision)
        return True


class ApiKeyRateThrottle(_DecidingThrottle):
    """60 per minute per API key, and API_ACCOUNT_RATE_LIMIT per minute for all the keys
    of the account together (both counted in one operation); unauthenticated requests
    are not counted here. The decision kept is the one refusing, else the one with less
    left: its headers are the ones the client must heed."""

    def allow_request(self, request, view):
        if not isinstance(request.auth, ApiKey):
            return True
        decisions = rate_limit_hits(
            limits=[
                Limit("api_key", str(request.auth.pk), API_KEY_LIMIT),
                Limit("account", str(request.auth.account_id), settings.API_ACCOUNT_RATE_LIMIT),
            ],
            period=API_KEY_PERIOD,
        )
        return self._enforce(min(decisions, key=lambda d: (d.allowed, d.remaining)))


class SignupRateThrottle(_DecidingThrottle):
    """SIGNUP_RATE_LIMIT signup attempts per hour per client IP, failed attempts included."""

    def allow_request(self, request, view):
        decision = rate_limit_hit(
            policy="signup",
            identity=client_ip_bucket(client_ip(request)),
            limit=settings.SIGNUP_RATE_LIMIT,
            period=SIGNUP_PERIOD,
        )
        return self._enforce(decision)


class VerificationEmailRateThrottle(_DecidingThrottle):
    """New verification links (POST /signup/verification): 5 an hour per account, so an
    account cannot turn the service's own mail on the address it signed up with."""

    def allow_request(self, request, view):
        if request.method != "POST" or not isinstance(request.auth, ApiKey):
            return True
        decision = rate_limit_hit(
            policy="verification_email",
            identity=str(request.auth.account_id),
            limit=VERIFICATION_EMAIL_LIMIT,
            period=VERIFICATION_EMAIL_PERIOD,
        )
        return self._enforce(decision)


class _Limit(TypedDict):
    policy: str
    identity: str
    limit: int
    period: int


def _auth_failure_limit(request) -> _Limit:
    """The failed-authentication limit of the client's IP, as the rate-limit calls take it."""
    return {
        "policy": "auth_failure",
        "identity": client_ip_bucket(client_ip(request)),
        "limit": ratelimit.AUTH_FAILURE_LIMIT,
        "period": ratelimit.AUTH_FAILURE_PERIOD,
    }


def auth_failures_check(request) -> None:
    """429 when the client's IP is over the failed-authentication limit (one read)."""
    decision = rate_limit_over(**_auth_failure_limit(request))
    if decision is not None:
        raise _rate_limited(decision)


def auth_failure_count(request) -> None:
    """Count one failed authentication of the client's IP; 429 once over the limit."""
    decision = rate_limit_hit(**_auth_failure_limit(request))
    if not decision.allowed:
        raise _rate_limited(decision)
