"""The SSRF guard and the HTTP session deliveries go through.

A webhook URL is checked when it is registered, and again on every connection:
the guarded connection resolves the host, refuses if any address is not public,
and connects to an address it just checked. There is no second lookup between
the check and the connect, so DNS rebinding cannot slip a private address in.
The Host header and TLS SNI/certificate checks still use the URL's host name,
because urllib3 keeps using `self.host` for those; only the TCP connect is pinned.
"""

import ipaddress
import os
import socket
import threading

import requests
from django.conf import settings
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NameResolutionError, NewConnectionError
from urllib3.util import connection as urllib3_connection

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class UnsafeAddress(ValueError):
    """The host resolves to an address webhooks may not reach. Not an OSError on
    purpose: urllib3 must not mistake it for a network error and retry it."""


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address stands for: mapped, 6to4 or NAT64."""
    if ip.ipv4_mapped:
        return ip.ipv4_mapped
    if ip.sixtofour:
        return ip.sixtofour
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def address_refusal(ip: IPAddress) -> str | None:
    """Why `ip` may not be a webhook destination, or None when it may."""
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(ip)
        if embedded is not None:
            return address_refusal(embedded)
    for attribute, label in (
        ("is_unspecified", "unspecified"),
        ("is_loopback", "loopback"),
        ("is_link_local", "link-local"),
        ("is_multicast", "multicast"),
        ("is_reserved", "reserved"),
        ("is_private", "private"),
    ):
        if getattr(ip, attribute):
            return label
    if isinstance(ip, ipaddress.IPv4Address) and ip in _CGNAT:
        return "shared (CGNAT)"
    if not ip.is_global:
        return "not globally routable"
    return None


def resolve_checked(host: str, port: int) -> list[IPAddress]:
    """Every address `host` resolves to, refusing if any of them is not allowed.

    All of them, not just the first: a name that also resolves to an internal
    address is refused outright. Raises socket.gaierror when the name does not
    resolve, UnsafeAddress when it resolves somewhere refused.
    """
    host = host.strip("[]").rstrip(".")
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        # getaddrinfo can return an IPv6 scope ("fe80::1%eth0"); drop it before parsing.
        addresses = list(
            dict.fromkeys(ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos)
        )
    else:
        addresses = [literal]
    if not settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS:
        for ip in addresses:
            reason = address_refusal(ip)
            if reason:
                raise UnsafeAddress(f"{host} resolves to {ip}, a {reason} address")
    return addresses


class _GuardedConnectionMixin:
    """Resolve, check, then connect to the checked address (urllib3 2.x)."""

    def _new_conn(self) -> socket.socket:
        try:
            addresses = resolve_checked(self._dns_host, self.port)
        except socket.gaierror as e:
            raise NameResolutionError(self.host, self, e) from e
        last_error: OSError | None = None
        for ip in addresses:
            try:
                return urllib3_connection.create_connection(
                    (str(ip), self.port),
                    self.timeout,
                    source_address=self.source_address,
                    socket_options=self.socket_options,
                )
            except TimeoutError as e:
                raise ConnectTimeoutError(
                    self, f"Connection to {self.host} timed out. (connect timeout={self.timeout})"
                ) from e
            except OSError as e:
                last_error = e
        raise NewConnectionError(self, f"Failed to establish a new connection: {last_error}")


class GuardedHTTPConnection(_GuardedConnectionMixin, HTTPConnection):
    pass


class GuardedHTTPSConnection(_GuardedConnectionMixin, HTTPSConnection):
    pass


class _GuardedHTTPPool(HTTPConnectionPool):
    ConnectionCls = GuardedHTTPConnection


class _GuardedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = GuardedHTTPSConnection


class GuardedAdapter(HTTPAdapter):
    def init_poolmanager(self, *args, **kwargs):
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {
            "http": _GuardedHTTPPool,
            "https": _GuardedHTTPSPool,
        }


def guarded_session() -> requests.Session:
    session = requests.Session()
    # No proxies, .netrc or CA bundles from the environment: a proxy would make
    # the connect go somewhere the guard never checked.
    session.trust_env = False
    adapter = GuardedAdapter(max_retries=0, pool_connections=32, pool_maxsize=4)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


_local = threading.local()


def delivery_session() -> requests.Session:
    """One session per worker process and thread, so keep-alive connections are
    reused across deliveries; a forked child never inherits its parent's sockets."""
    pid = os.getpid()
    if getattr(_local, "pid", None) != pid:
        _local.session = guarded_session()
        _local.pid = pid
    return _local.session
