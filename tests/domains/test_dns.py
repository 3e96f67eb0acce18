"""config.dns: DNS_RESOLVERS, and each kind of answer from a real server."""

import pytest

from config.dns import FAILED, NODATA, NXDOMAIN, OK, lookup, resolvers_parse


@pytest.mark.parametrize(
    ("value", "servers"),
    [
        ("", []),
        ("127.0.0.1:5353", [("127.0.0.1", 5353)]),
        ("10.0.0.1, [::1]:53, [2001:db8::1]", [("10.0.0.1", 53), ("::1", 53), ("2001:db8::1", 53)]),
        ("192.0.2.1", [("192.0.2.1", 53)]),
    ],
)
def test_resolvers_parse(value, servers):
    assert resolvers_parse(value) == servers


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("dns.example.com:53", "is not an IP address"),
        ("127.0.0.1:0", "is not a port"),
        ("127.0.0.1:99999", "is not a port"),
        ("[::1]x", "is not host:port"),
    ],
)
def test_resolvers_parse_refuses(value, message):
    with pytest.raises(ValueError, match=message):
        resolvers_parse(value)


def test_answers_from_the_configured_server(dns_server):
    dns_server.add("example.test", "MX", "10 mx.example.test.")
    dns_server.add("example.test", "TXT", "v=spf1 -all")
    dns_server.drop("slow.test")
    dns_server.servfail("broken.test")

    assert lookup("example.test", "MX").records == ["10 mx.example.test."]
    assert lookup("example.test", "TXT").status == OK
    assert lookup("example.test", "AAAA").status == NODATA
    assert lookup("nowhere.test", "MX").status == NXDOMAIN
    timed_out = lookup("slow.test", "MX")
    assert (timed_out.status, timed_out.error) == (FAILED, "timed out after 0.5s")
    assert lookup("broken.test", "MX").status == FAILED
    assert ("example.test", "MX") in dns_server.queries


def test_answers_are_cached_for_their_ttl(dns_server):
    dns_server.add("cached.test", "MX", "10 mx.cached.test.")
    lookup("cached.test", "MX")
    lookup("cached.test", "MX")
    assert dns_server.queries.count(("cached.test", "MX")) == 1


def test_a_name_that_is_not_a_domain_fails_without_a_question(dns_server):
    found = lookup("a..b", "MX")
    assert found.status == FAILED
    assert dns_server.queries == []
