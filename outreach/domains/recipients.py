"""Whether a recipient's domain can receive mail at all: the check at import and enroll
(RECIPIENT_DOMAIN_CHECK; docs/deliverability.md, "Recipient domains").

A domain cannot receive mail when it does not exist, when it publishes a null MX (RFC
7505: one MX record, preference 0, exchange "."), or when it has neither MX nor A/AAAA
records (RFC 5321 5.1 falls back to the address records). A lookup that fails (time-out,
SERVFAIL) proves nothing: such a domain is never skipped, and its verdict not kept.

Verdicts are kept in the cache (Redis, or the embedded mode's file cache) per domain and
per resolver configuration: a day for a domain that receives mail, an hour for one that
does not (it may be fixed). The domains of a batch are looked up concurrently
(DNS_LOOKUP_CONCURRENCY), each once.
"""

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings
from django.core.cache import cache

from config.dns import FAILED, NODATA, NXDOMAIN, lookup

REASON = "domain_has_no_mail_server"
RECEIVES_TTL = 24 * 3600
NO_MAIL_TTL = 3600


def domain_receives_mail(domain: str) -> bool | None:
    """True when `domain` can receive mail, False when DNS says it cannot, None when the
    lookups failed (unknown). Not cached: see domains_without_mail_server."""
    mx = lookup(domain, "MX")
    if mx.status == NXDOMAIN:
        return False
    if mx.status == FAILED:
        return None
    if mx.found:
        return not _null_mx(mx.records)
    # NODATA: no MX; the address records stand in for it.
    failed = False
    for rdtype in ("A", "AAAA"):
        address = lookup(domain, rdtype)
        if address.found:
            return True
        if address.status == NXDOMAIN:
            return False
        failed = failed or address.status != NODATA
    return None if failed else False


def _null_mx(records: list[str]) -> bool:
    """RFC 7505: a single MX record, "0 ."."""
    return len(records) == 1 and records[0].split() == ["0", "."]


def _cache_key(domain: str) -> str:
    return f"recipient-domain:{settings.DNS_RESOLVERS}:{domain}"


def domains_without_mail_server(domains: Iterable[str]) -> set[str]:
    """The domains among `domains` that cannot receive mail. Cached verdicts first (one
    cache round trip), the rest looked up concurrently and their definite verdicts kept."""
    wanted = {d.lower() for d in domains if d}
    if not wanted:
        return set()
    keys = {_cache_key(d): d for d in wanted}
    known = {keys[key]: value for key, value in cache.get_many(list(keys)).items()}
    unknown = sorted(wanted - set(known))
    if unknown:
        workers = min(settings.DNS_LOOKUP_CONCURRENCY, len(unknown))
        if workers == 1:
            verdicts = [domain_receives_mail(unknown[0])]
        else:
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dns") as pool:
                verdicts = list(pool.map(domain_receives_mail, unknown))
        found = dict(zip(unknown, verdicts, strict=True))
        for ttl, value in ((RECEIVES_TTL, True), (NO_MAIL_TTL, False)):
            batch = {_cache_key(d): value for d, v in found.items() if v is value}
            if batch:
                cache.set_many(batch, ttl)
        known.update({d: v for d, v in found.items() if v is not None})
    return {domain for domain, receives in known.items() if receives is False}


def email_domain(email: str) -> str:
    return email.rpartition("@")[2].lower()


def recipient_refusal(email: str) -> str | None:
    """The message for an address whose domain cannot receive mail, or None (also when
    RECIPIENT_DOMAIN_CHECK is off)."""
    if not settings.RECIPIENT_DOMAIN_CHECK:
        return None
    domain = email_domain(email)
    if domain in domains_without_mail_server([domain]):
        return no_mail_server_message(domain)
    return None


def no_mail_server_message(domain: str) -> str:
    return (
        f"The domain {domain} cannot receive mail (no MX, A or AAAA record, or a null MX); "
        f"the address is skipped ({REASON})."
    )
