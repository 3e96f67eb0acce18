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
    dns_server.queries                  # [(name, type)] asked, in order (names without the dot)

A name the server holds no record of is NXDOMAIN; a name with records of other types
only is NODATA (NOERROR, no answer), as an authoritative server answers.

Run as a script (`python -m tests.support.dns_server --port N --delay 0.02 --wildcard-mx
example.net`) it serves until stopped (SIGTERM; `--count` then prints the questions
answered): the import benchmark's peer.
"""

import argparse
import fnmatch
import signal
import threading
import time

import pytest
from dnslib import QTYPE, RCODE, RR, TXT, DNSRecord
from dnslib.server import BaseResolver, DNSLogger, DNSServer, TCPServer, UDPServer

from tests.support.ports import free_port


class _Drop(Exception):
    pass


class DnsZone(BaseResolver):
    def __init__(self) -> None:
        self.records: dict[str, list[tuple[str, str, int]]] = {}
        self.dropped: set[str] = set()
        self.failing: set[str] = set()
        self.delay = 0.0
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
        name = str(request.q.qname).rstrip(".").lower()
        qtype = QTYPE[request.q.qtype]
        with self._lock:
            self.queries.append((name, qtype))
        if self.delay:
            time.sleep(self.delay)
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
    if rtype == "TXT":
        # A long TXT value travels as several strings of at most 255 bytes, as zones write it.
        data = value.encode()
        chunks = [data[i : i + 255] for i in range(0, len(data), 255)] or [b""]
        return [RR(f"{name}.", QTYPE.TXT, rdata=TXT(chunks), ttl=ttl)]
    return RR.fromZone(f"{name}. {ttl} {rtype} {value}")


class _Quiet(DNSLogger):
    def __init__(self) -> None:
        super().__init__(log="-request,-reply,-truncated,-error,-recv,-send,-data")

    def log_error(self, handler, e) -> None:  # a dropped question is not an error
        pass


def _handle_error(self, request, client_address) -> None:
    """socketserver prints every exception a handler raises; a dropped question raises
    on purpose."""


class _QuietUDPServer(UDPServer):
    handle_error = _handle_error


class _QuietTCPServer(TCPServer):
    handle_error = _handle_error


class DnsTestServer(DnsZone):
    def __init__(self, port: int = 0) -> None:
        super().__init__()
        self.port = port or free_port()
        self._servers = [
            DNSServer(self, address="127.0.0.1", port=self.port, logger=_Quiet(), server=server)
            for server in (_QuietUDPServer, _QuietTCPServer)
        ]

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> "DnsTestServer":
        for server in self._servers:
            server.start_thread()
        return self

    def stop(self) -> None:
        for server in self._servers:
            server.stop()
            server.server.server_close()


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
    server = DnsTestServer(args.port)
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
