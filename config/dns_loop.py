"""Many DNS questions at once: one event loop per process (config.dns's second path).

Checks that ask many names at once (the recipient domains of an import) use
`lookups_start`: coroutines of `lookup_async` on one event loop per process, in a
thread of its own, many questions in flight on a few connected UDP sockets (dnspython
parses the answers; no resolver object, no thread per question), with the same
servers, order, failover on an error answer, time bound, TCP retry of a truncated answer
and classification (`_classified`, on config.dns's `Lookup`) as `config.dns.lookup`.
Not cached in the process (the recipient check keeps its verdicts in the shared cache).
Unlike the resolver, a server whose port is closed is passed over at once (a connected
socket hears the refusal).
"""

import asyncio
import os
import socket
import struct
import threading
from collections.abc import Callable, Coroutine, Iterable
from concurrent.futures import Future, InvalidStateError
from typing import Any, TypeVar

import dns.asyncquery
import dns.entropy
import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.nameserver
import dns.opcode
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.resolver
from django.conf import settings

from config.dns import FAILED, NODATA, NXDOMAIN, OK, Lookup, _text, resolvers_parse

T = TypeVar("T")

# Questions sent from one UDP socket before the next question opens another (a new random
# source port): an answer forged off the path must guess the port as well as the ID.
_QUESTIONS_PER_SOCKET = 256


class _ServerError(Exception):
    """This server gave no usable answer (an error code, a malformed or truncated-over-TCP
    message, a refused connection): the next server is asked."""


async def lookup_async(
    name: str, rdtype: str, servers: list[tuple[str, int]], timeout: float
) -> Lookup:
    """`lookup` on the event loop: one question, asked of `servers` in order (the next
    when one answers an error code or refuses; a truncated answer asked again over TCP of
    the same server), all within `timeout` seconds. Not cached in the process (the
    callers keep their verdicts)."""
    try:
        qname = dns.name.from_unicode(name.rstrip(".") + ".")
    except (dns.exception.DNSException, UnicodeError, ValueError) as exc:
        return Lookup(name, rdtype, FAILED, error=f"not a domain name ({exc})")
    query = _Question(qname, dns.rdatatype.from_text(rdtype))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    try:
        for address, port in servers:
            try:
                response = await _ask(query, address, port, deadline)
                return _classified(name, rdtype, response)
            except _ServerError:
                continue
            except TimeoutError:
                break
    except dns.exception.DNSException as exc:
        return Lookup(name, rdtype, FAILED, error=str(exc) or type(exc).__name__)
    if loop.time() >= deadline:
        return Lookup(name, rdtype, FAILED, error=f"timed out after {timeout:g}s")
    return Lookup(name, rdtype, FAILED, error="no server answered (SERVFAIL or refused)")


class _Question:
    """One question as `dns.message.make_query(qname, rdtype, use_edns=False)` writes it
    (recursion desired, no EDNS), its message written directly: the only part of a query
    that changes is its ID."""

    def __init__(self, qname: dns.name.Name, rdtype: dns.rdatatype.RdataType) -> None:
        self.qname = qname
        self.rdtype = rdtype
        self.id = dns.entropy.random_16()
        name = qname.to_wire()  # uncompressed: bytes
        assert name is not None
        self._question = name + struct.pack("!HH", rdtype, dns.rdataclass.IN)

    def to_wire(self) -> bytes:
        return struct.pack("!HHHHHH", self.id, dns.flags.RD, 1, 0, 0, 0) + self._question

    def message(self) -> dns.message.Message:
        """The same query as a dnspython message (to ask it over TCP)."""
        query = dns.message.make_query(self.qname, self.rdtype, use_edns=False)
        query.id = self.id
        return query

    def is_response(self, response: dns.message.Message) -> bool:
        """dnspython's `Message.is_response` for this query."""
        if (
            not response.flags & dns.flags.QR
            or response.id != self.id
            or dns.opcode.from_flags(response.flags) != dns.opcode.QUERY
        ):
            return False
        if not response.question and response.rcode() in _ERRORS_WITHOUT_QUESTION:
            return True
        return len(response.question) == 1 and (
            response.question[0].name == self.qname
            and response.question[0].rdtype == self.rdtype
            and response.question[0].rdclass == dns.rdataclass.IN
        )


# Answers that may leave the question out (dnspython's is_response accepts them so).
_ERRORS_WITHOUT_QUESTION = frozenset(
    {dns.rcode.FORMERR, dns.rcode.SERVFAIL, dns.rcode.NOTIMP, dns.rcode.REFUSED}
)


async def _ask(query: _Question, address: str, port: int, deadline: float) -> dns.message.Message:
    """One server's answer to `query` (UDP, then TCP when it comes truncated). Raises
    TimeoutError past `deadline`, _ServerError when the server gave no usable answer."""
    loop = asyncio.get_running_loop()
    channel = await _channel(loop, address, port)
    answered = channel.send(query)
    timer = loop.call_at(deadline, _expire, answered)
    try:
        response = await answered
    except TimeoutError:
        raise
    except OSError as exc:  # the server's port refused (ICMP), the socket failed
        raise _ServerError(str(exc)) from None
    finally:
        timer.cancel()
        channel.forget(query.id, answered)
    if response.flags & dns.flags.TC:
        remaining = deadline - loop.time()
        if remaining <= 0:
            raise TimeoutError
        try:
            response = await dns.asyncquery.tcp(
                query.message(), address, timeout=remaining, port=port
            )
        except dns.exception.Timeout:
            raise TimeoutError from None
        except (OSError, EOFError, dns.exception.FormError) as exc:
            raise _ServerError(str(exc)) from None
        if response.flags & dns.flags.TC:
            raise _ServerError("truncated over TCP")
    rcode = response.rcode()
    if rcode == dns.rcode.YXDOMAIN:
        raise dns.resolver.YXDOMAIN()
    if rcode not in (dns.rcode.NOERROR, dns.rcode.NXDOMAIN):
        raise _ServerError(dns.rcode.to_text(rcode))
    return response


def _expire(answered: "asyncio.Future[dns.message.Message]") -> None:
    if not answered.done():
        answered.set_exception(TimeoutError())


class _Channel(asyncio.DatagramProtocol):
    """A UDP socket connected to one server (only its datagrams reach it; a closed port is
    an error at once), carrying up to _QUESTIONS_PER_SOCKET questions; the answers are
    matched to their question by ID and question (dnspython's `is_response`)."""

    def __init__(self) -> None:
        self.transport: asyncio.DatagramTransport | None = None
        self.pending: dict[int, tuple[_Question, asyncio.Future]] = {}
        self.sent = 0
        self.closed = False

    def connection_made(self, transport) -> None:
        self.transport = transport

    @property
    def full(self) -> bool:
        return self.closed or self.sent >= _QUESTIONS_PER_SOCKET

    def send(self, query: _Question) -> "asyncio.Future[dns.message.Message]":
        answered: asyncio.Future[dns.message.Message] = asyncio.get_running_loop().create_future()
        while query.id in self.pending:
            query.id = dns.entropy.random_16()
        self.pending[query.id] = (query, answered)
        self.sent += 1
        assert self.transport is not None
        self.transport.sendto(query.to_wire())
        return answered

    def forget(self, query_id: int, answered: asyncio.Future) -> None:
        held = self.pending.get(query_id)
        if held is not None and held[1] is answered:
            del self.pending[query_id]
        if self.full and not self.pending and self.transport is not None:
            self.transport.close()

    def datagram_received(self, data: bytes, addr) -> None:
        held = self.pending.get(int.from_bytes(data[:2], "big")) if len(data) >= 2 else None
        if held is None:
            return  # late (its question timed out) or not an answer to us
        query, answered = held
        try:
            response = dns.message.from_wire(data)
        except dns.exception.FormError as exc:
            # From the server (the socket is connected), for this ID: a malformed answer.
            _settle(answered, exception=_ServerError(str(exc)))
            return
        except dns.exception.DNSException:
            return
        if query.is_response(response):
            _settle(answered, result=response)

    def error_received(self, exc: Exception) -> None:
        # The server's port refused a datagram: every question waiting here is refused.
        for _, answered in list(self.pending.values()):
            _settle(answered, exception=exc)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        for _, answered in list(self.pending.values()):
            _settle(answered, exception=exc or ConnectionError("socket closed"))


def _settle(answered: asyncio.Future, *, result=None, exception=None) -> None:
    if answered.done():
        return
    if exception is not None:
        answered.set_exception(exception)
    else:
        answered.set_result(result)


# The open channel of each server, per event loop (only the DNS loop's thread uses them).
_channels: dict[tuple[asyncio.AbstractEventLoop, str, int], _Channel] = {}
_channels_opening: dict[tuple[asyncio.AbstractEventLoop, str, int], asyncio.Lock] = {}


async def _channel(loop: asyncio.AbstractEventLoop, address: str, port: int) -> _Channel:
    key = (loop, address, port)
    found = _channels.get(key)
    if found is not None and not found.full:
        return found
    lock = _channels_opening.setdefault(key, asyncio.Lock())
    async with lock:
        found = _channels.get(key)
        if found is None or found.full:
            family = socket.AF_INET6 if ":" in address else socket.AF_INET
            try:
                _, found = await loop.create_datagram_endpoint(
                    _Channel, remote_addr=(address, port), family=family
                )
            except OSError as exc:
                raise _ServerError(str(exc)) from None
            previous = _channels.get(key)
            _channels[key] = found
            if previous is not None and not previous.pending and previous.transport:
                previous.transport.close()
        return found


def _classified(name: str, rdtype: str, response: dns.message.Message) -> Lookup:
    """The Lookup of a NOERROR or NXDOMAIN answer, as `lookup` classifies dnspython's."""
    try:
        assert isinstance(response, dns.message.QueryMessage)
        chain = response.resolve_chaining()
    except (dns.exception.DNSException, AssertionError) as exc:
        raise _ServerError(str(exc)) from None
    if response.rcode() == dns.rcode.NXDOMAIN:
        return Lookup(name, rdtype, NXDOMAIN)
    cname = ""
    for rrset in response.answer:
        if rrset.rdtype == dns.rdatatype.CNAME:
            cname = rrset[0].target.to_text().rstrip(".").lower()
            break
    if chain.answer is None:
        return Lookup(name, rdtype, NODATA, cname=cname)
    return Lookup(name, rdtype, OK, records=[_text(rdata) for rdata in chain.answer], cname=cname)


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


class _Loop:
    """An event loop running in a daemon thread of this process."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="dns", daemon=True)
        self.thread.start()


_lock = threading.Lock()
_loop: _Loop | None = None


def _running_loop() -> asyncio.AbstractEventLoop:
    """The process's DNS event loop, started at first use (again in a forked child)."""
    global _loop
    found = _loop
    if found is not None and found.pid == os.getpid():
        return found.loop
    with _lock:
        if _loop is None or _loop.pid != os.getpid():
            _loop = _Loop()
        return _loop.loop


def lookups_start(
    jobs: Iterable[Callable[[], Coroutine[Any, Any, T]]], concurrency: asyncio.Semaphore
) -> list["Future[T]"]:
    """Run each job (a coroutine function, e.g. of `lookup_async`) on the process's DNS
    event loop, at most as many at once as `concurrency` allows, and return at once their
    futures, in order. Cancelling a future cancels its job (its sockets are closed)."""
    jobs = list(jobs)
    futures: list[Future[T]] = [Future() for _ in jobs]
    if not jobs:
        return futures
    loop = _running_loop()

    def start() -> None:
        for job, future in zip(jobs, futures, strict=True):
            if not future.cancelled():
                task = loop.create_task(_bounded(job, concurrency))
                task.add_done_callback(_copier(future))
                future.add_done_callback(_canceller(loop, task))

    loop.call_soon_threadsafe(start)
    return futures


async def _bounded(job: Callable[[], Coroutine[Any, Any, T]], concurrency: asyncio.Semaphore) -> T:
    async with concurrency:
        return await job()


def _copier(future: "Future[T]") -> Callable[["asyncio.Task[T]"], None]:
    def copy(task: "asyncio.Task[T]") -> None:
        try:
            if task.cancelled():
                future.cancel()
            elif (error := task.exception()) is not None:
                future.set_exception(error)
            else:
                future.set_result(task.result())
        except InvalidStateError:
            pass  # the caller cancelled it meanwhile

    return copy


def _canceller(loop: asyncio.AbstractEventLoop, task: "asyncio.Task") -> Callable[[Future], None]:
    def cancel(future: Future) -> None:
        if future.cancelled() and not task.done():
            loop.call_soon_threadsafe(task.cancel)

    return cancel
