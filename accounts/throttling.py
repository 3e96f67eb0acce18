"""DRF throttles: 60 requests a minute per API key on every authenticated
request (the global default), SIGNUP_RATE_LIMIT signups an hour per client IP (5 in
production).

Each throttle keeps its decision (`decision`); the views' base
(config.api.viewsets.RateLimitHeadersMixin) turns it into the IETF
RateLimit-Policy / RateLimit headers, on 429s and successes alike. A 429 carries the
headers of the limit it is for (RateLimited.headers), so the failed-authentication
limit, checked before any throttle runs, sends them too.
"""

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
    RateLimitDecision,
    rate_limit_hit,
    rate_limit_over,
)
from config.api.errors import RateLimited


def client_ip(request) -> str:
    """The client's address, honouring settings.TRUSTED_PROXY_COUNT.

    With N trusted proxies in front, each appends the address it received the
    request from to X-Forwarded-For, so the client is the N-th entry from the
    right: whatever a client writes into the header itself sits further left and
    is ignored. With no trusted proxy the header is not read at all. A header
    with fewer entries than proxies, or a malformed entry, falls back to
    REMOTE_ADDR.
    """
    remote = request.META.get("REMOTE_ADDR", "")
    trusted = settings.TRUSTED_PROXY_COUNT
    if trusted > 0:
        forwarded = [
            part.strip()
            for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")
            if part.strip()
        ]
        if len(forwarded) >= trusted:
            candidate = forwarded[-trusted]
            try:
                ipaddress.ip_address(candidate)
            except ValueError:
                return remote
            return candidate
    return remote


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
    """60 per minute per API key; unauthenticated requests are not counted here."""

    def allow_request(self, request, view):
        if not isinstance(request.auth, ApiKey):
            return True
        decision = rate_limit_hit(
            policy="api_key",
            identity=str(request.auth.pk),
            limit=API_KEY_LIMIT,
            period=API_KEY_PERIOD,
        )
        return self._enforce(decision)


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
