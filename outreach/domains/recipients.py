"""Whether a recipient's domain can receive mail at all: the check at import and enroll
(RECIPIENT_DOMAIN_CHECK; docs/deliverability.md, "Recipient domains").

A domain cannot receive mail when it does not exist, when it publishes a null MX (RFC
7505: one MX record, preference 0, exchange "."), or when it has neither MX nor A/AAAA
records (RFC 5321 5.1 falls back to the address records). A lookup that fails (time-out,
SERVFAIL) proves nothing: such a domain is never skipped, and its verdict not kept.

Verdicts are kept in the cache (Redis, or the embedded mode's file cache) per domain and
per resolver configuration: a day for a domain that receives mail, an hour for one that
does not (it may be fixed). Lookups run on the process's DNS event loop
(config.dns.lookups_start), DNS_LOOKUP_CONCURRENCY domains at once, each domain once:
`RecipientDomainLookups` lets a contact import ask for the domains of the batches it
reads ahead, so their lookups overlap the writes of the batch before.
"""

import asyncio
import time
from collections.abc import Iterable
from concurrent.futures import Future, wait
from dataclasses import dataclass
from functools import partial

from django.conf import settings
from django.core.cache import cache

from config.dns import (
    FAILED,
    NODATA,
    NXDOMAIN,
    lookup_async,
    lookups_start,
    servers_configured,
)
from outreach.emails import SIMULATOR_DOMAIN

REASON = "domain_has_no_mail_server"
RECEIVES_TTL = 24 * 3600
NO_MAIL_TTL = 3600


async def domain_receives_mail(
    domain: str, servers: list[tuple[str, int]], timeout: float
) -> bool | None:
    """True when `domain` can receive mail, False when DNS says it cannot, None when the
    lookups failed (unknown). Asks `servers` (config.dns.lookup_async), each question
    within `timeout`. Not cached: see RecipientDomainLookups."""
    mx = await lookup_async(domain, "MX", servers, timeout)
    if mx.status == NXDOMAIN:
        return False
    if mx.status == FAILED:
        return None
    if mx.found:
        return not _null_mx(mx.records)
    # NODATA: no MX; the address records stand in for it.
    failed = False
    for rdtype in ("A", "AAAA"):
        address = await lookup_async(domain, rdtype, servers, timeout)
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


# The definite verdicts one RecipientDomainLookups remembers (an import's run), so a
# domain met again in a later batch is not read from the shared cache again: at most this
# many domains (the oldest forgotten first), each for at most this long.
RUN_MEMORY_DOMAINS = 100_000
RUN_MEMORY_SECONDS = 300


@dataclass(frozen=True)
class Asked:
    """The domains of one `RecipientDomainLookups.ask`, to be answered in turn."""

    number: int
    # The domains whose verdict was not remembered: read from the cache or looked up.
    domains: frozenset[str]
    # The remembered ones that cannot receive mail.
    known_without_mail_server: frozenset[str] = frozenset()


def _answered(verdict: bool | None) -> "Future[bool | None]":
    done: Future[bool | None] = Future()
    done.set_result(verdict)
    return done


class RecipientDomainLookups:
    """Verdicts for successive sets of domains (the batches of an import), looked up ahead.

    `ask(domains)` returns at once: the verdicts it remembers are taken, the cached ones
    read (one cache round trip for the rest), the other domains handed to the DNS event
    loop, DNS_LOOKUP_CONCURRENCY domains looked up at once, each domain once (a domain
    asked again while its lookup is held is not asked twice).
    `without_mail_server(asked)` waits for that set's lookups, keeps their definite
    verdicts in the cache and returns the domains that cannot receive mail. Answers are
    taken in the order asked; a lookup is held only until the last set naming it is
    answered. Definite verdicts (read or looked up) are remembered for the sets asked
    later, at most RUN_MEMORY_DOMAINS of them for RUN_MEMORY_SECONDS each, so memory is
    bounded whatever the number of sets. A lookup that failed (None) is neither cached nor
    remembered: a later set that names it again asks again.

    One thread (the caller's) asks and answers; the event loop's thread only asks DNS.
    """

    def __init__(self, concurrency: int | None = None) -> None:
        self._concurrency = asyncio.Semaphore(concurrency or settings.DNS_LOOKUP_CONCURRENCY)
        self._servers = servers_configured()
        self._timeout = settings.DNS_TIMEOUT_SECONDS
        self._verdicts: dict[str, Future[bool | None]] = {}
        self._last_asked: dict[str, int] = {}
        self._unsaved: set[str] = set()
        # domain -> (receives mail, remembered until: time.monotonic())
        self._memory: dict[str, tuple[bool, float]] = {}
        self._asked = 0

    def __enter__(self) -> "RecipientDomainLookups":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Cancel the lookups not answered yet (a run that stops early): their sockets
        are closed, nothing is cached."""
        for verdict in self._verdicts.values():
            verdict.cancel()
        self._verdicts.clear()
        self._last_asked.clear()
        self._unsaved.clear()
        self._memory.clear()

    def ask(self, domains: Iterable[str]) -> Asked:
        self._asked += 1
        now = time.monotonic()
        pending: set[str] = set()
        known_bad: set[str] = set()
        # The simulator's domain has no MX and needs none: nothing is ever sent to it.
        for domain in {d.lower() for d in domains if d} - {SIMULATOR_DOMAIN}:
            remembered = None if domain in self._verdicts else self._memory.get(domain)
            if remembered is not None and remembered[1] > now:
                if remembered[0] is False:
                    known_bad.add(domain)
            else:
                pending.add(domain)
        new = sorted(d for d in pending if d not in self._verdicts)
        if new:
            keys = {_cache_key(d): d for d in new}
            cached = {keys[key]: value for key, value in cache.get_many(list(keys)).items()}
            for domain in new:
                if domain in cached:
                    self._verdicts[domain] = _answered(cached[domain])
            unknown = [domain for domain in new if domain not in cached]
            started = lookups_start(
                (partial(domain_receives_mail, d, self._servers, self._timeout) for d in unknown),
                self._concurrency,
            )
            self._verdicts.update(zip(unknown, started, strict=True))
            self._unsaved.update(unknown)
        for domain in pending:
            self._last_asked[domain] = self._asked
        return Asked(self._asked, frozenset(pending), frozenset(known_bad))

    def without_mail_server(self, asked: Asked) -> set[str]:
        # One wait for all (not a wake-up per answer), then the answers.
        wait([self._verdicts[domain] for domain in asked.domains])
        found = {domain: self._verdicts[domain].result() for domain in asked.domains}
        fresh = asked.domains & self._unsaved
        self._unsaved -= fresh
        for ttl, value in ((RECEIVES_TTL, True), (NO_MAIL_TTL, False)):
            batch = {_cache_key(d): value for d in fresh if found[d] is value}
            if batch:
                cache.set_many(batch, ttl)
        until = time.monotonic() + RUN_MEMORY_SECONDS
        for domain in asked.domains:
            if self._last_asked[domain] == asked.number:
                del self._verdicts[domain], self._last_asked[domain]
            receives = found[domain]
            if receives is not None:
                self._remember(domain, receives, until)
        bad = {domain for domain, receives in found.items() if receives is False}
        return bad | asked.known_without_mail_server

    def _remember(self, domain: str, receives: bool, until: float) -> None:
        self._memory.pop(domain, None)
        self._memory[domain] = (receives, until)
        if len(self._memory) > RUN_MEMORY_DOMAINS:
            del self._memory[next(iter(self._memory))]  # the oldest


def domains_without_mail_server(domains: Iterable[str]) -> set[str]:
    """The domains among `domains` that cannot receive mail: cached verdicts first (one
    cache round trip), the rest looked up concurrently and their definite verdicts kept."""
    with RecipientDomainLookups() as lookups:
        return lookups.without_mail_server(lookups.ask(domains))


def email_domain(email: str) -> str:
    """The domain of an address: what follows its last "@", stripped and in lower case.
    The one definition for the recipient domain check and the stopping rules
    (outreach.campaigns.stopping), so both see the same domain of a contact. Their
    addresses are cleaned (outreach.emails.email_clean) or stored ones, where the strip
    changes nothing; it keeps a stray space from making another domain."""
    return email.rpartition("@")[2].strip().lower()


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
