"""The account's tracking domain (docs/deliverability.md, "Tracking domain").

An account may name a host of its own (`track.example.com`) for the open pixel and the
click links of its emails, instead of the service's shared host. The host must be a
CNAME to TRACKING_DOMAIN_CNAME_TARGET (BASE_URL's host by default): the proof the
account controls it, and what makes it reach the service. It is used only once DNS
shows that CNAME (status `verified`); beat checks it again.

Requests for a verified tracking domain reach the service with that Host:
`TrackingHostMiddleware` lets them in for the tracking paths (`/t/...`) only.
"""

from django.conf import settings
from django.http.request import split_domain_port, validate_host

from accounts.models import Account
from config.dns import FAILED, lookup

TRACKING_PATH_PREFIX = "/t/"


def tracking_domain_verify(domain: str) -> str | None:
    """`verified` when `domain` is a CNAME to the target, `failed` when DNS says it is not
    (no CNAME, another target, no such name), None when the lookup failed (unknown)."""
    found = lookup(domain, "CNAME")
    if found.status == FAILED:
        return None
    target = settings.TRACKING_DOMAIN_CNAME_TARGET.rstrip(".").lower()
    if found.found and target in {r.rstrip(".").lower() for r in found.records}:
        return Account.TrackingDomainStatus.VERIFIED
    return Account.TrackingDomainStatus.FAILED


class TrackingHostMiddleware:
    """Lets a request for a tracking path in under a verified tracking domain's Host,
    which ALLOWED_HOSTS does not list: the Host becomes BASE_URL's (the original is kept
    in request.META["HTTP_X_TRACKING_HOST"]). Every other request is left as it came (an
    unknown Host is refused by Django as before). One indexed query per such request."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.path.startswith(TRACKING_PATH_PREFIX):
            raw = request.META.get("HTTP_HOST", "")
            host, _ = split_domain_port(raw)
            if (
                host
                and not validate_host(host, settings.ALLOWED_HOSTS)
                and Account.objects.filter(
                    tracking_domain=host,
                    tracking_domain_status=Account.TrackingDomainStatus.VERIFIED,
                ).exists()
            ):
                request.META["HTTP_X_TRACKING_HOST"] = raw
                request.META["HTTP_HOST"] = settings.BASE_URL.split("://", 1)[-1].split("/")[0]
        return self.get_response(request)
