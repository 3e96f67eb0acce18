"""Zones the domain check tests serve from their DNS server (tests/support/dns_server.py)."""

import pytest


def authenticated_zone(server, domain: str) -> None:
    """A domain as a well-run sender publishes it: SPF, DKIM (Google's selector), DMARC
    with a quarantine policy, MX."""
    server.add(domain, "TXT", "v=spf1 include:_spf.provider.test -all")
    server.add("_spf.provider.test", "TXT", "v=spf1 ip4:192.0.2.0/24 -all")
    server.add(f"google._domainkey.{domain}", "TXT", "v=DKIM1; k=rsa; p=MIGfMA0GCSqGSIb3")
    server.add(f"_dmarc.{domain}", "TXT", "v=DMARC1; p=quarantine; rua=mailto:d@" + domain)
    server.add(domain, "MX", f"10 mx.{domain}.")


@pytest.fixture
def zone(dns_server):
    return dns_server
