"""A REAL authoritative DNS server (dnslib's) on 127.0.0.1, for the domain checks.

Fixture `dns_server`: a server on a free port (UDP and TCP), in threads, stopped when the
test ends, with settings.DNS_RESOLVERS pointing at it (and DNS_TIMEOUT_SECONDS short,
so a lookup it never answers times out quickly).

    dns_server.add("example.test", "MX", "10 mx.example.test.")
    dns_server.add("example.test", "TXT", "v=spf1 -all")
    dns_server.add("*.bulk.test", "MX", "10 mx.bulk.test.")   # any name under bulk.test
    dns_server.add("track.example.test", "CNAME", "service.test.")
    dns_server.drop("slow.test")        # never answers questions about this name (a time-out)
    dns_server.servfail("broken.test")  # answers SERVFAIL
    dns_server.delay = 0.02             # every answer 20 ms late
    dns_server.udp_max = 512            # longer UDP answers truncated (asked again over TCP)
    dns_server.queries                  # [(name, type)] asked, in order (names without the dot)

A name the server holds no record of is NXDOMAIN; a name with records of other types
only is NODATA (NOERROR, no answer), as an authoritative server answers.

Run as a script (`python -m tests.support.dns_server --port N --delay 0.02 --wildcard-mx
example.net`) it serves until stopped (SIGTERM; `--count` then prints the questions
answered): the import benchmark's peer. The script answers UDP questions from one event
loop (`DnsTestServer(event_loop_udp=True)`): each answer is sent `delay` after its
question arrived, as the threaded server's sleep does, without a thread per question, so
the peer costs the machine it shares little.
"""

import argparse
import asyncio
import fnmatch
import functools
import signal
import threading
import time

import pytest
from dnslib import QTYPE, RCODE, RR, TXT, DNSRecord
from dnslib.server import (
    BaseResolver,
    DNSHandler,
    DNSLogger,
    DNSServer,
    TCPServer,
    UDPServer,
)

from tests.support.ports import free_port


class _Drop(Exception):
    pass


class DnsZone(BaseResolver):
    def __init__(self) -> None:
        self.records: dict[str, list[tuple[str, str, int]]] = {}
        self.dropped: set[str] = set()
        self.failing: set[str] = set()
        self.delay = 0.0
        # Longer UDP answers are sent truncated (TC, no records: ask again over TCP); 0: never.
        self.udp_max = 0
        self.queries: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def add(self, name: str, rtype: str, value: str, ttl: int = 60) -> None:
        self.records.setdefault(name.rstrip(".").lower(), []).append((rtype, value, ttl))

    def drop(self, name: str) -> None:
        self.dropped.add(name.rstrip(".").lower())

    def servfail(self, name: str) -> None:
        self.failing.add(name.rstrip(".").lower())

    def _held(self, name: str) -> list[tuple[str, str, int]] | None:
        if name in self.records:
            return self.records[name]
        for pattern, records in self.records.items():
            if "*" in pattern and fnmatch.fnmatchcase(name, pattern):
                return records
        return None

    def resolve(self, request: DNSRecord, handler) -> DNSRecord:
        self.asked(request)
        if self.delay:
            time.sleep(self.delay)
        return self.answer(request)

    def asked(self, request: DNSRecord) -> None:
        name = str(request.q.qname).rstrip(".").lower()
        with self._lock:
            self.queries.append((name, QTYPE[request.q.qtype]))

    def answer(self, request: DNSRecord) -> DNSRecord:
        """The answer to `request`, at once; raises _Drop for a name never answered."""
        name = str(request.q.qname).rstrip(".").lower()
        qtype = QTYPE[request.q.qtype]
        if name in self.dropped:
            raise _Drop()
        reply = request.reply()
        reply.header.aa = 1
        if name in self.failing:
            reply.header.rcode = RCODE.SERVFAIL
            return reply
        held = self._held(name)
        if held is None:
            reply.header.rcode = RCODE.NXDOMAIN
            return reply
        for rtype, value, ttl in held:
            if rtype == qtype or (rtype == "CNAME" and qtype != "CNAME"):
                reply.add_answer(*_records(name, rtype, value, ttl))
        return reply


def _records(name: str, rtype: str, value: str, ttl: int) -> list[RR]:
    """The records of one zone entry, owned by `name` (a wildcard's answers carry the
    name asked)."""
    return [
        RR(f"{name}.", rr.rtype, rr.rclass, rr.ttl, rr.rdata) for rr in _parsed(rtype, value, ttl)
    ]


@functools.lru_cache(maxsize=1024)
def _parsed(rtype: str, value: str, ttl: int) -> list[RR]:
    """A zone entry's records, parsed once (their data is never changed)."""
    if rtype == "TXT":
        # A long TXT value travels as several strings of at most 255 bytes, as zones write it.
        data = value.encode()
        chunks = [data[i : i + 255] for i in range(0, len(data), 255)] or [b""]
        return [RR("owner.", QTYPE.TXT, rdata=TXT(chunks), ttl=ttl)]
    return RR.fromZone(f"owner. {ttl} {rtype} {value}")


class _Quiet(DNSLogger):
    def __init__(self) -> None:
        super().__init__(log="-request,-reply,-truncated,-error,-recv,-send,-data")

    def log_error(self, handler, e) -> None:  # a dropped question is not an error
        pass


def _handle_error(self, request, client_address) -> None:
    """socketserver prints every exception a handler raises; a dropped question raises
    on purpose."""


class _Handler(DNSHandler):
    """dnslib's handler (without its logger, quiet here), truncating UDP answers longer than
    the zone's `udp_max` as a server does (the question kept, TC set, no records)."""

    def get_reply(self, data: bytes) -> bytes:
        request = DNSRecord.parse(data)
        reply = self.server.resolver.resolve(request, self)
        wire = reply.pack()
        if self.protocol == "udp":
            wire = _fitted(reply, wire, self.server.resolver.udp_max)
        return wire


def _fitted(reply: DNSRecord, wire: bytes, udp_max: int) -> bytes:
    if not udp_max or len(wire) <= udp_max:
        return wire
    truncated = reply.truncate()  # dnslib's drops the question too: put it back
    truncated.add_question(*reply.questions)
    return truncated.pack()


class _QuietUDPServer(UDPServer):
    handle_error = _handle_error


class _QuietTCPServer(TCPServer):
    handle_error = _handle_error


class _DelayedUdp(asyncio.DatagramProtocol):
    """UDP questions answered from an event loop, each `zone.delay` after it arrived."""

    def __init__(self, zone: DnsZone) -> None:
        self.zone = zone
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport

    def datagram_received(self, data: bytes, addr) -> None:
        try:
            request = DNSRecord.parse(data)
        except Exception:  # noqa: BLE001 - not a DNS question: no answer, as dnslib's server
            return
        self.zone.asked(request)
        loop = asyncio.get_running_loop()
        loop.call_later(self.zone.delay, self._send, request, addr)

    def _send(self, request: DNSRecord, addr) -> None:
        try:
            reply = self.zone.answer(request)
        except _Drop:
            return
        assert self.transport is not None
        self.transport.sendto(_fitted(reply, reply.pack(), self.zone.udp_max), addr)


class _EventLoopUdpServer:
    """The UDP half of the server on an event loop in a thread of its own."""

    def __init__(self, zone: DnsZone, port: int) -> None:
        self.loop = asyncio.new_event_loop()
        self.transport = self.loop.run_until_complete(
            self.loop.create_datagram_endpoint(
                lambda: _DelayedUdp(zone), local_addr=("127.0.0.1", port)
            )
        )[0]
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def start_thread(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.transport.close()
        self.loop.close()


class DnsTestServer(DnsZone):
    def __init__(self, port: int = 0, *, event_loop_udp: bool = False) -> None:
        super().__init__()
        self.port = port or free_port()
        servers = [_QuietTCPServer] if event_loop_udp else [_QuietUDPServer, _QuietTCPServer]
        self._servers: list = [
            DNSServer(
                self,
                address="127.0.0.1",
                port=self.port,
                logger=_Quiet(),
                server=server,
                handler=_Handler,
            )
            for server in servers
        ]
        if event_loop_udp:
            self._udp = _EventLoopUdpServer(self, self.port)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> "DnsTestServer":
        for server in self._servers:
            server.start_thread()
        if hasattr(self, "_udp"):
            self._udp.start_thread()
        return self

    def stop(self) -> None:
        for server in self._servers:
            server.stop()
            server.server.server_close()
        if hasattr(self, "_udp"):
            self._udp.stop()


@pytest.fixture
def dns_server(settings):
    server = DnsTestServer().start()
    settings.DNS_RESOLVERS = server.address
    settings.DNS_TIMEOUT_SECONDS = 0.5
    try:
        yield server
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument(
        "--wildcard-mx", action="append", default=[], help="an MX for every name under it"
    )
    parser.add_argument(
        "--count", action="store_true", help="print the questions answered when stopped"
    )
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    server = DnsTestServer(args.port, event_loop_udp=True)
    server.delay = args.delay
    for suffix in args.wildcard_mx:
        server.add(f"*.{suffix}", "MX", f"10 mx.{suffix}.")
        server.add(suffix, "MX", f"10 mx.{suffix}.")
    server.start()
    print(f"DNS server on {server.address}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()
        if args.count:
            print(f"{len(server.queries)} questions", flush=True)


if __name__ == "__main__":
    main()
