"""The account's tracking domain (docs/deliverability.md, "Tracking domain").

An account may name a host of its own (`track.example.com`) for the open pixel and the
click links of its emails, instead of the service's shared host. Two DNS records prove
it, and both must be there for an account to take the domain (status `verified`):

- a CNAME to TRACKING_DOMAIN_CNAME_TARGET (BASE_URL's host by default): what makes the
  host reach the service;
- a TXT record at `_outreach-verify.<domain>` whose value is `outreach-verification=<the
  account's token>`: the proof that *this* account controls the domain, since a CNAME to
  the service proves nothing about which of its accounts set it up. The record sits on a
  name of its own because a name that is a CNAME can hold no other record (RFC 1034
  3.6.2), as Vercel's `_vercel`, GitHub Pages' `_github-pages-challenge-<owner>` and
  Netlify's `netlify-challenge` records do.

The token names the account and nothing else: it is derived from the account's id, so
it never changes (a SECRET_KEY rotation keeps it) and needs no row. It is no secret
(anyone may read the TXT record): what proves ownership is that only the domain's owner
can publish it.

Once the domain is the account's, what keeps it `verified` is the CNAME alone
(`tracking_domain_reached`): the TXT record decides who takes a domain, and a contest
(outreach.domains.services.tracking_domain_set), not whether the links already sent on
it answer. A domain verified before the TXT record was asked for keeps working so, until
the account that proves it takes it over.

Requests for a verified tracking domain reach the service with that Host:
`TrackingHostMiddleware` lets them in for the tracking paths (`/t/...`) only, and
`tracking_host_serves` answers whether a token's enrollment may be served on the host
it was requested on (its account's verified domain, or the service's own host).
"""

import base64
import hashlib

from django.conf import settings
from django.db.models import BooleanField, Exists, ExpressionWrapper, OuterRef
from django.http.request import split_domain_port, validate_host

from accounts.models import Account
from config.dns import FAILED, lookup
from outreach.models.sending import Enrollment
from outreach.models.tombstones import DeletedEnrollment

TRACKING_PATH_PREFIX = "/t/"
VERIFICATION_NAME_PREFIX = "_outreach-verify."
VERIFICATION_VALUE_PREFIX = "outreach-verification="


def verification_token(account_id) -> str:
    """The account's token: 32 characters of base32 from its id (stable, no row)."""
    digest = hashlib.sha256(f"outreach.tracking-domain:{account_id}".encode()).digest()
    return base64.b32encode(digest).decode()[:32].lower()


def verification_record(account_id, domain: str) -> tuple[str | None, str]:
    """(name, value) of the TXT record that proves the account owns `domain`; the name is
    None without a domain."""
    value = VERIFICATION_VALUE_PREFIX + verification_token(account_id)
    return (VERIFICATION_NAME_PREFIX + domain if domain else None), value


def tracking_domain_cname_ok(domain: str) -> bool | None:
    """Whether `domain` is a CNAME to the target; None when the lookup failed."""
    found = lookup(domain, "CNAME", cached=False)
    if found.status == FAILED:
        return None
    target = settings.TRACKING_DOMAIN_CNAME_TARGET.rstrip(".").lower()
    return found.found and target in {r.rstrip(".").lower() for r in found.records}


def tracking_domain_proven(domain: str, account_id) -> bool | None:
    """Whether the TXT record of `domain` names this account; None when the lookup
    failed. Other TXT values beside it do not matter (another service's, an old one)."""
    name, value = verification_record(account_id, domain)
    assert name is not None
    found = lookup(name, "TXT", cached=False)
    if found.status == FAILED:
        return None
    return found.found and value in {r.strip() for r in found.records}


def tracking_domain_verify(domain: str, account_id) -> str | None:
    """`verified` when `domain` is a CNAME to the target and its TXT record names the
    account, `failed` when DNS says either is not so, None when a lookup failed and
    nothing said no (unknown)."""
    cname = tracking_domain_cname_ok(domain)
    if cname is False:
        return Account.TrackingDomainStatus.FAILED
    proven = tracking_domain_proven(domain, account_id)
    if proven is False:
        return Account.TrackingDomainStatus.FAILED
    if cname is None or proven is None:
        return None
    return Account.TrackingDomainStatus.VERIFIED


def tracking_domain_reached(domain: str) -> str | None:
    """The re-check of a domain already `verified` for its account: `verified` while it is
    a CNAME to the target, `failed` when DNS says it is not (the host no longer reaches
    the service), None when the lookup failed. Its TXT record is not asked for: it let the
    account take the domain, and only another account's proof ends that
    (outreach.domains.services.tracking_domain_set)."""
    cname = tracking_domain_cname_ok(domain)
    if cname is None:
        return None
    return Account.TrackingDomainStatus.VERIFIED if cname else Account.TrackingDomainStatus.FAILED


def _service_netloc() -> str:
    return settings.BASE_URL.split("://", 1)[-1].split("/")[0]


def service_host() -> str:
    """The service's own host (BASE_URL's), where every account's tokens answer."""
    return split_domain_port(_service_netloc())[0]


def _named_host(host: str) -> bool:
    """Whether ALLOWED_HOSTS names `host` itself (not through a wildcard): one of the
    service's own names (a proxy's upstream name, 127.0.0.1 behind it, ...)."""
    return any(
        pattern.lower() == host
        for pattern in settings.ALLOWED_HOSTS
        if "*" not in pattern and not pattern.startswith(".")
    )


def tracking_host_serves(request, enrollment_id) -> bool:
    """Whether a pixel or click token of `enrollment_id` may be answered on the host it
    was requested on: the service's own host (BASE_URL's: no query); the verified
    tracking domain of the enrollment's account; or another of the service's own names,
    one ALLOWED_HOSTS names literally and no account holds as its verified domain (one
    query on indexed keys for both). Any other host, another account's verified domain
    included, is not where that token was sent: the caller answers 404."""
    host = getattr(request, "tracking_host", None)
    if host is None:
        host, _ = split_domain_port(request.META.get("HTTP_HOST", ""))
    # No Host at all (HTTP/1.0): Django reads the server's own name, the service's.
    if not host or host == service_host():
        return True
    # A deleted enrollment's links still lead somewhere: its tombstone names the contact,
    # and so the account.
    mine = Exists(Enrollment.objects.filter(pk=enrollment_id, campaign__account=OuterRef("pk")))
    tombstone = Exists(
        DeletedEnrollment.objects.filter(pk=enrollment_id, contact__account=OuterRef("pk"))
    )
    holder = (
        Account.objects.filter(
            tracking_domain=host, tracking_domain_status=Account.TrackingDomainStatus.VERIFIED
        )
        .annotate(serves=ExpressionWrapper(mine | tombstone, output_field=BooleanField()))
        .values_list("serves", flat=True)
        .first()
    )
    if holder is not None:
        return holder
    return _named_host(host)


class TrackingHostMiddleware:
    """Lets a request for a tracking path in under a verified tracking domain's Host,
    which ALLOWED_HOSTS does not list: the Host becomes BASE_URL's (the original is kept
    in request.META["HTTP_X_TRACKING_HOST"], and in `request.tracking_host` for every
    tracking path). Every other request is left as it came (an unknown Host is refused by
    Django as before). One indexed query per such request."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.path.startswith(TRACKING_PATH_PREFIX):
            raw = request.META.get("HTTP_HOST", "")
            host, _ = split_domain_port(raw)
            # The host asked for, before any rewrite: tracking_host_serves reads it.
            request.tracking_host = host
            if (
                host
                and not validate_host(host, settings.ALLOWED_HOSTS)
                and Account.objects.filter(
                    tracking_domain=host,
                    tracking_domain_status=Account.TrackingDomainStatus.VERIFIED,
                ).exists()
            ):
                request.META["HTTP_X_TRACKING_HOST"] = raw
                request.META["HTTP_HOST"] = _service_netloc()
        return self.get_response(request)
