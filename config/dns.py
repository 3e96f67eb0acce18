"""The resolver of every DNS check (sender domains, recipient domains, tracking domains).

`DNS_RESOLVERS` names the servers asked (`host:port`, comma-separated; empty: the
system's, from /etc/resolv.conf), so tests and private deployments point the checks at a
server of their own. Each lookup is bounded by DNS_TIMEOUT_SECONDS in all. Answers are
cached in the process for their TTL (dnspython's LRU cache), negative ones included.

A lookup never raises: it answers `Lookup`, whose `status` tells an answer (`ok`), a name
that does not exist (`nxdomain`), a name without records of that type (`nodata`) and a
lookup that could not be made (`failed`: a time-out, SERVFAIL, no server answering):
the callers decide what each means, and a failure is never taken for an absence.

Checks that ask many names at once (the recipient domains of an import) use
`lookup_async` (dnspython's asynchronous resolver, the same servers, time bound and
classification, nothing cached in the process) through `lookups_start`, many questions in
flight on one event loop per process.
"""

import asyncio
import ipaddress
import os
import threading
from collections.abc import Callable, Coroutine, Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, TypeVar

import dns.asyncresolver
import dns.exception
import dns.name
import dns.nameserver
import dns.rdatatype
import dns.resolver
from django.conf import settings

T = TypeVar("T")

OK = "ok"
NXDOMAIN = "nxdomain"
NODATA = "nodata"
FAILED = "failed"

# Names cached per process (dnspython's LRU cache honours each answer's TTL).
CACHE_SIZE = 10_000


@dataclass(frozen=True)
class Lookup:
    name: str
    rdtype: str
    status: str
    # The records as dnspython writes them (TXT strings joined, quotes removed).
    records: list[str] = field(default_factory=list)
    # What went wrong when `status` is FAILED ("timed out", "no answer from ..."), for messages.
    error: str = ""
    # The target of a CNAME met on the way (the first), for the tracking domain check.
    cname: str = ""

    @property
    def found(self) -> bool:
        return self.status == OK


def resolvers_parse(value: str) -> list[tuple[str, int]]:
    """`host:port` items (an IP address; `[v6]:port` for IPv6; the port defaults to 53).
    Raises ValueError naming a bad item."""
    servers = []
    for item in (part.strip() for part in value.split(",")):
        if not item:
            continue
        host, port = item, "53"
        if item.startswith("["):
            host, _, rest = item[1:].partition("]")
            if rest:
                if not rest.startswith(":"):
                    raise ValueError(f"{item!r} is not host:port")
                port = rest[1:]
        elif item.count(":") == 1:
            host, port = item.split(":")
        try:
            address = str(ipaddress.ip_address(host))
        except ValueError:
            raise ValueError(f"{item!r}: {host!r} is not an IP address") from None
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{item!r}: {port!r} is not a port")
        servers.append((address, int(port)))
    return servers


_lock = threading.Lock()
_resolvers: dict[tuple, dns.resolver.Resolver] = {}


def _configured(made: dns.resolver.BaseResolver, servers: list[tuple[str, int]], timeout: float):
    if servers:
        made.nameservers = [
            dns.nameserver.Do53Nameserver(address, port) for address, port in servers
        ]
    made.lifetime = timeout
    made.timeout = timeout


def resolver(*, cached: bool = True) -> dns.resolver.Resolver:
    """The resolver for the current settings (one per configuration, shared by threads:
    dnspython's resolver and its cache are thread-safe); `cached` False: one without a
    cache, for checks that must see a record just published."""
    key = (settings.DNS_RESOLVERS, settings.DNS_TIMEOUT_SECONDS, cached)
    found = _resolvers.get(key)
    if found is not None:
        return found
    with _lock:
        if key not in _resolvers:
            servers = resolvers_parse(settings.DNS_RESOLVERS)
            made = dns.resolver.Resolver(configure=not servers)
            _configured(made, servers, settings.DNS_TIMEOUT_SECONDS)
            made.cache = dns.resolver.LRUCache(CACHE_SIZE) if cached else None
            _resolvers[key] = made
        return _resolvers[key]


def lookup(name: str, rdtype: str, *, cached: bool = True) -> Lookup:
    """One question (`rdtype`: "MX", "TXT", "A", "AAAA", "CNAME"), its answer classified;
    `cached` False asks the servers whatever this process heard before (the tracking
    domain check: a person who just published a record and asks again must see it)."""
    try:
        qname = dns.name.from_unicode(name.rstrip(".") + ".")
    except (dns.exception.DNSException, UnicodeError, ValueError) as exc:
        return Lookup(name, rdtype, FAILED, error=f"not a domain name ({exc})")
    try:
        answer = resolver(cached=cached).resolve(qname, rdtype, raise_on_no_answer=False)
    except dns.exception.DNSException as exc:
        return _failure(name, rdtype, exc, f"{settings.DNS_TIMEOUT_SECONDS}s")
    return _classified(name, rdtype, answer)


async def lookup_async(
    name: str, rdtype: str, servers: list[tuple[str, int]], timeout: float
) -> Lookup:
    """`lookup` on an event loop (dnspython's asynchronous resolver): one question, asked
    of `servers` in order (the next when one answers an error code or refuses), all within
    `timeout` seconds. Not cached in the process (the callers keep their verdicts)."""
    try:
        qname = dns.name.from_unicode(name.rstrip(".") + ".")
    except (dns.exception.DNSException, UnicodeError, ValueError) as exc:
        return Lookup(name, rdtype, FAILED, error=f"not a domain name ({exc})")
    if not servers:
        return Lookup(name, rdtype, FAILED, error=_NO_SERVER)
    key = (tuple(servers), timeout)
    found = _async_resolvers.get(key)
    if found is None:
        found = dns.asyncresolver.Resolver(configure=False)
        _configured(found, servers, timeout)
        found.cache = None
        _async_resolvers[key] = found
    try:
        answer = await found.resolve(qname, rdtype, raise_on_no_answer=False)
    except dns.exception.DNSException as exc:
        return _failure(name, rdtype, exc, f"{timeout:g}s")
    return _classified(name, rdtype, answer)


# The asynchronous resolver of each (servers, timeout) (only the DNS loop's thread uses them).
_async_resolvers: dict[tuple, dns.asyncresolver.Resolver] = {}
_NO_SERVER = "no server answered (SERVFAIL or refused)"


def _failure(name: str, rdtype: str, exc: dns.exception.DNSException, timeout: str) -> Lookup:
    if isinstance(exc, dns.resolver.NXDOMAIN):
        return Lookup(name, rdtype, NXDOMAIN)
    if isinstance(exc, dns.resolver.LifetimeTimeout):
        return Lookup(name, rdtype, FAILED, error=f"timed out after {timeout}")
    if isinstance(exc, dns.resolver.NoNameservers):
        return Lookup(name, rdtype, FAILED, error=_NO_SERVER)
    return Lookup(name, rdtype, FAILED, error=str(exc) or type(exc).__name__)


def _classified(name: str, rdtype: str, answer: dns.resolver.Answer) -> Lookup:
    cname = ""
    response = answer.response
    for rrset in response.answer if response is not None else []:
        if rrset.rdtype == dns.rdatatype.CNAME:
            cname = rrset[0].target.to_text().rstrip(".").lower()
            break
    if answer.rrset is None:
        return Lookup(name, rdtype, NODATA, cname=cname)
    return Lookup(name, rdtype, OK, records=[_text(rdata) for rdata in answer.rrset], cname=cname)


def _text(rdata) -> str:
    if rdata.rdtype == dns.rdatatype.TXT:
        return b"".join(rdata.strings).decode("utf-8", "replace")
    if rdata.rdtype == dns.rdatatype.MX:
        return f"{rdata.preference} {rdata.exchange.to_text()}"
    if rdata.rdtype == dns.rdatatype.CNAME:
        return rdata.target.to_text().rstrip(".").lower()
    return rdata.to_text()


def servers_configured() -> list[tuple[str, int]]:
    """The servers `lookup` asks: DNS_RESOLVERS, or the system's (/etc/resolv.conf)."""
    servers = resolvers_parse(settings.DNS_RESOLVERS)
    if servers:
        return servers
    try:
        system = dns.resolver.Resolver()
    except dns.resolver.NoResolverConfiguration:
        return []  # nothing to ask: every lookup fails ("no server answered")
    return [(str(address), system.port) for address in system.nameservers]


# --- many questions at once: one event loop per process -------------------------------------


class _Loop:
    """An event loop running in a daemon thread of this process."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="dns", daemon=True)
        self.thread.start()


_loop_lock = threading.Lock()
_loop: _Loop | None = None


def _running_loop() -> asyncio.AbstractEventLoop:
    """The process's DNS event loop, started at first use (again in a forked child)."""
    global _loop
    found = _loop
    if found is not None and found.pid == os.getpid():
        return found.loop
    with _loop_lock:
        if _loop is None or _loop.pid != os.getpid():
            _loop = _Loop()
        return _loop.loop


def lookups_start(
    jobs: Iterable[Callable[[], Coroutine[Any, Any, T]]], concurrency: asyncio.Semaphore
) -> list["Future[T]"]:
    """Run each job (a coroutine function, e.g. of `lookup_async`) on the process's DNS
    event loop, at most as many at once as `concurrency` allows, and return at once their
    futures, in order. Cancelling a future cancels its job."""
    loop = _running_loop()
    return [asyncio.run_coroutine_threadsafe(_bounded(job, concurrency), loop) for job in jobs]


async def _bounded(job: Callable[[], Coroutine[Any, Any, T]], concurrency: asyncio.Semaphore) -> T:
    async with concurrency:
        return await job()
