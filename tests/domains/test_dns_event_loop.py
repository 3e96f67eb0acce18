"""config.dns's event loop path (`lookup_async`, `lookups_start`), which the recipient
domain check uses: the same answers as `lookup` from a real server, DNS_RESOLVERS order
and failover, the time bound, TCP after a truncated answer; and the test server's event
loop mode (the import benchmark's peer)."""

import asyncio
import concurrent.futures

import pytest

from config.dns import (
    FAILED,
    NODATA,
    NXDOMAIN,
    OK,
    lookup,
    lookup_async,
    lookups_start,
    servers_configured,
)
from tests.support.dns_server import DnsTestServer
from tests.support.ports import free_port


def ask(name, rdtype, servers, timeout=0.5):
    """One lookup_async on the process's DNS event loop, waited for."""
    [found] = lookups_start(
        [lambda: lookup_async(name, rdtype, servers, timeout)], asyncio.Semaphore(4)
    )
    return found.result(timeout=10)


@pytest.fixture
def second_server():
    server = DnsTestServer().start()
    try:
        yield server
    finally:
        server.stop()


def test_each_kind_of_answer_as_lookup_gives_it(dns_server):
    dns_server.add("example.test", "MX", "10 mx.example.test.")
    dns_server.add("example.test", "TXT", "v=spf1 -all")
    dns_server.add("www.example.test", "CNAME", "example.test.")
    dns_server.drop("slow.test")
    dns_server.servfail("broken.test")
    servers = servers_configured()

    for name, rdtype in [
        ("example.test", "MX"),
        ("example.test", "TXT"),
        ("example.test", "AAAA"),
        ("nowhere.test", "MX"),
        ("www.example.test", "CNAME"),
        ("www.example.test", "MX"),
    ]:
        assert ask(name, rdtype, servers) == lookup(name, rdtype), (name, rdtype)
    assert ask("example.test", "MX", servers).records == ["10 mx.example.test."]
    assert ask("example.test", "AAAA", servers).status == NODATA
    assert ask("nowhere.test", "MX", servers).status == NXDOMAIN
    via_cname = ask("www.example.test", "MX", servers)
    assert (via_cname.status, via_cname.cname) == (NODATA, "example.test")
    timed_out = ask("slow.test", "MX", servers)
    assert (timed_out.status, timed_out.error) == (FAILED, "timed out after 0.5s")
    broken = ask("broken.test", "MX", servers)
    assert (broken.status, broken.error) == (FAILED, "no server answered (SERVFAIL or refused)")


def test_a_name_that_is_not_a_domain_fails_without_a_question(dns_server):
    found = ask("a..b", "MX", servers_configured())
    assert found.status == FAILED
    assert found.error.startswith("not a domain name")
    assert dns_server.queries == []


def test_no_server_to_ask_is_a_failure():
    found = ask("example.test", "MX", [])
    assert (found.status, found.error) == (FAILED, "no server answered (SERVFAIL or refused)")


def test_servers_are_asked_in_order_the_next_when_one_fails(dns_server, second_server):
    dns_server.servfail("example.test")
    second_server.add("example.test", "MX", "10 mx.example.test.")
    servers = [("127.0.0.1", dns_server.port), ("127.0.0.1", second_server.port)]

    found = ask("example.test", "MX", servers)
    assert (found.status, found.records) == (OK, ["10 mx.example.test."])
    assert dns_server.queries == [("example.test", "MX")]
    assert second_server.queries == [("example.test", "MX")]
    # A server that answers (NXDOMAIN included) is the answer: the next is not asked.
    assert ask("nowhere.test", "MX", servers).status == NXDOMAIN
    assert ("nowhere.test", "MX") not in second_server.queries


def test_a_closed_port_is_a_server_that_never_answers(second_server, settings):
    """As `lookup` (the resolver's unconnected UDP socket does not hear the refusal)."""
    second_server.add("example.test", "MX", "10 mx.example.test.")
    closed = ("127.0.0.1", free_port())  # nothing listens
    found = ask("example.test", "MX", [closed, ("127.0.0.1", second_server.port)], timeout=0.3)
    assert (found.status, found.error) == (FAILED, "timed out after 0.3s")
    assert second_server.queries == []
    settings.DNS_RESOLVERS = f"127.0.0.1:{closed[1]},{second_server.address}"
    settings.DNS_TIMEOUT_SECONDS = 0.3
    assert lookup("example.test", "MX").error == "timed out after 0.3s"


def test_a_server_that_never_answers_takes_the_whole_time_bound(dns_server, second_server):
    dns_server.drop("example.test")
    second_server.add("example.test", "MX", "10 mx.example.test.")
    servers = [("127.0.0.1", dns_server.port), ("127.0.0.1", second_server.port)]
    found = ask("example.test", "MX", servers, timeout=0.3)
    assert (found.status, found.error) == (FAILED, "timed out after 0.3s")
    assert second_server.queries == []  # as `lookup`: the time-out is the lookup's


def test_a_truncated_answer_is_asked_again_over_tcp(dns_server):
    long_spf = "v=spf1 " + " ".join(f"ip4:192.0.2.{i}" for i in range(60)) + " -all"
    dns_server.add("long.test", "TXT", long_spf)
    dns_server.udp_max = 512
    found = ask("long.test", "TXT", servers_configured())
    assert (found.status, found.records) == (OK, [long_spf])
    assert lookup("long.test", "TXT").records == [long_spf]  # the resolver does the same
    assert dns_server.queries.count(("long.test", "TXT")) == 4  # UDP then TCP, each


def test_many_lookups_at_once_each_get_their_own_answer(dns_server):
    dns_server.add("*.bulk.test", "MX", "10 mx.bulk.test.")
    dns_server.add("null.bulk.test", "MX", "0 .")
    dns_server.delay = 0.02
    servers = servers_configured()
    names = [f"d{i}.bulk.test" for i in range(300)] + ["null.bulk.test", "gone.test"]
    futures = lookups_start(
        [lambda name=name: lookup_async(name, "MX", servers, 5.0) for name in names],
        asyncio.Semaphore(64),
    )
    found = [future.result(timeout=30) for future in futures]
    assert [f.name for f in found] == names
    assert all(f.records == ["10 mx.bulk.test."] for f in found[:300])
    assert found[300].records == ["0 ."]
    assert found[301].status == NXDOMAIN
    assert len(dns_server.queries) == 302  # each asked once, none lost among the sockets


def test_a_cancelled_lookup_stops(dns_server):
    dns_server.drop("slow.test")
    servers = servers_configured()
    [slow] = lookups_start(
        [lambda: lookup_async("slow.test", "MX", servers, 30.0)], asyncio.Semaphore(1)
    )
    assert slow.cancel()
    with pytest.raises(concurrent.futures.CancelledError):
        slow.result(timeout=10)
    # The loop goes on with the next questions.
    dns_server.add("example.test", "MX", "10 mx.example.test.")
    assert ask("example.test", "MX", servers).status == OK


def test_the_event_loop_server_answers_as_the_threaded_one(settings):
    server = DnsTestServer(event_loop_udp=True).start()
    settings.DNS_RESOLVERS = server.address
    settings.DNS_TIMEOUT_SECONDS = 0.5
    try:
        server.delay = 0.02
        server.add("*.bulk.test", "MX", "10 mx.bulk.test.")
        server.add("v6.test", "AAAA", "2001:db8::1")
        server.drop("slow.test")
        server.servfail("broken.test")
        servers = servers_configured()
        assert ask("one.bulk.test", "MX", servers).records == ["10 mx.bulk.test."]
        assert ask("two.bulk.test", "MX", servers).records == ["10 mx.bulk.test."]
        assert ask("v6.test", "AAAA", servers).records == ["2001:db8::1"]
        assert ask("v6.test", "MX", servers).status == NODATA
        assert ask("nowhere.test", "MX", servers).status == NXDOMAIN
        assert ask("slow.test", "MX", servers).error == "timed out after 0.5s"
        assert ask("broken.test", "MX", servers).status == FAILED
        assert server.queries[:2] == [("one.bulk.test", "MX"), ("two.bulk.test", "MX")]
        # TCP stays dnslib's: a truncated answer is asked again there.
        server.udp_max = 512
        long_spf = "v=spf1 " + " ".join(f"ip4:192.0.2.{i}" for i in range(60)) + " -all"
        server.add("long.test", "TXT", long_spf)
        assert ask("long.test", "TXT", servers).records == [long_spf]
    finally:
        server.stop()
