"""The outbound connection guard: every connection the service opens to a host an
account named (webhook URLs, a mailbox's SMTP and IMAP servers) goes through here.

1. The name is resolved once, and every address it resolves to is checked against
   the refused ranges below (all of them, not just the first: a name that also
   resolves inside is refused outright).
2. The connection is made to an address just checked. There is no second lookup
   between the check and the connect, so DNS rebinding cannot slip an internal
   address in. TLS SNI and certificate checks (and HTTP's Host header) still use
   the host name.
3. The same check runs when a host is registered (a 422 for the account) and at
   every connect (the name may resolve elsewhere by then): the attempt fails with
   OutboundRefused, which the caller records.

OUTBOUND_ALLOW_PRIVATE_NETWORKS lets every address through (tests, local
development; the embedded mode turns it on by default).

An HTTP request through these pools can also be given a total deadline
(config.outbound_deadline.request_deadline): connect, headers and body together.
"""

import imaplib
import ipaddress
import re
import smtplib
import socket
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from django.conf import settings
from requests.utils import DEFAULT_CA_BUNDLE_PATH
from urllib3 import PoolManager
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import (
    ConnectTimeoutError,
    LocationParseError,
    NameResolutionError,
    NewConnectionError,
)
from urllib3.util import connection as urllib3_connection
from urllib3.util import parse_url

from config.outbound_deadline import deadline_current, deadline_watch

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class OutboundRefused(ValueError):
    """The host resolves to an address the service may not connect to on an
    account's behalf. Not an OSError on purpose: no caller may mistake it for a
    network error and retry it (urllib3 would)."""


def _networks(label: str, *cidrs: str) -> list[tuple[ipaddress._BaseNetwork, str]]:
    return [(ipaddress.ip_network(cidr), label) for cidr in cidrs]


# Every refused range, by the IANA special-purpose registries (RFC 6890 and its
# updates), not by `ipaddress`' is_global alone: its view has changed between Python
# versions. The first match names the reason.
REFUSED_NETWORKS = [
    *_networks("unspecified", "0.0.0.0/32", "::/128"),
    *_networks("this-network", "0.0.0.0/8"),
    *_networks("loopback", "127.0.0.0/8", "::1/128"),
    *_networks("private", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"),
    *_networks("shared (100.64/10)", "100.64.0.0/10"),
    *_networks("link-local", "169.254.0.0/16", "fe80::/10"),
    *_networks("site-local", "fec0::/10"),
    *_networks("unique-local", "fc00::/7"),
    *_networks("multicast", "224.0.0.0/4", "ff00::/8"),
    *_networks("IETF protocol assignment", "192.0.0.0/24", "2001::/23"),
    *_networks(
        "documentation",
        "192.0.2.0/24",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "2001:db8::/32",
        "3fff::/20",
    ),
    *_networks("benchmarking", "198.18.0.0/15"),
    *_networks(
        "reserved",
        "192.88.99.0/24",  # the retired 6to4 relay anycast
        "240.0.0.0/4",  # 255.255.255.255 (broadcast) included
        "::/8",  # IPv4-compatible, SIIT and the rest of the reserved ::/8
        "64:ff9b:1::/48",  # local-use NAT64 (RFC 8215)
        "100::/64",  # discard-only
        "5f00::/16",  # SRv6 segment identifiers
    ),
]
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_GLOBAL_UNICAST_V6 = ipaddress.ip_network("2000::/3")


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
    """Why the service may not connect to `ip` on an account's behalf, or None."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.scope_id:
            return "scoped (zone-bound)"
        embedded = _embedded_ipv4(ip)
        if embedded is not None:
            reason = address_refusal(embedded)
            return f"{reason} (as {ip})" if reason else None
    for network, label in REFUSED_NETWORKS:
        if ip.version == network.version and ip in network:
            return label
    if isinstance(ip, ipaddress.IPv6Address) and ip not in _GLOBAL_UNICAST_V6:
        return "reserved"
    if not ip.is_global:  # a belt to the explicit braces above
        return "not globally routable"
    return None


def private_networks_allowed() -> bool:
    return bool(settings.OUTBOUND_ALLOW_PRIVATE_NETWORKS)


def resolve_checked(host: str, port: int) -> list[IPAddress]:
    """Every address `host` resolves to, refusing if any of them is refused.

    Raises socket.gaierror when the name does not resolve, OutboundRefused when it
    resolves somewhere refused (unless OUTBOUND_ALLOW_PRIVATE_NETWORKS).
    """
    host = host.strip("[]").rstrip(".")
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        # getaddrinfo can return an IPv6 scope ("fe80::1%eth0"): keep it, refused above.
        addresses = list(dict.fromkeys(ipaddress.ip_address(info[4][0]) for info in infos))
    else:
        addresses = [literal]
    if not private_networks_allowed():
        for ip in addresses:
            reason = address_refusal(ip)
            if reason:
                raise OutboundRefused(f"{host} resolves to {ip}, a {reason} address")
    return addresses


def connect_checked(
    host: str, port: int, timeout: float | None, source_address=None
) -> socket.socket:
    """A TCP connection to `host`, made to an address resolve_checked just allowed.

    The addresses are tried in order; the last connect error is raised if none
    answers. OutboundRefused, socket.gaierror and OSError as the caller knows them.
    """
    last_error: OSError | None = None
    for ip in resolve_checked(host, port):
        try:
            if timeout is None:
                return socket.create_connection((str(ip), port), source_address=source_address)
            return socket.create_connection((str(ip), port), timeout, source_address)
        except OSError as exc:
            last_error = exc
    raise last_error or OSError(f"{host} has no address")


# --- host names and URLs an account registers ---------------------------------------

_HOST_NAME = re.compile(
    r"^(?=.{1,253}$)([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?\.)*"
    r"[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?\.?$"
)


def host_normalize(host: str) -> str:
    """The host as the connection will use it: lowercase, IDNA for a non-ASCII name,
    an IPv6 literal without brackets. ValueError with the message to show when it is
    not a host name or address (a port, a scheme, spaces, control characters)."""
    value = host.strip()
    if value.startswith("[") and value.endswith("]"):
        value = value[1:-1]
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        pass
    try:
        value = value.encode("idna").decode("ascii").lower()
    except UnicodeError:
        raise ValueError("Enter a host name or an IP address.") from None
    if not _HOST_NAME.match(value):
        raise ValueError("Enter a host name or an IP address (no scheme, port or path).")
    return value


def host_refusal(host: str, port: int) -> str | None:
    """Why an account may not register `host`, or None: refused addresses only. A name
    that does not resolve now is not refused here: the connect will say so."""
    try:
        resolve_checked(host, port)
    except OutboundRefused as exc:
        return f"Not allowed: {exc}. The service connects only to public addresses."
    except (OSError, UnicodeError):
        return None
    return None


def http_url_parts(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of an http(s) URL, read by the parser the HTTP client uses
    (urllib3's), and only when Python's own parser reads the same host: a URL the two
    would read differently (`http://127.0.0.1:80\\@name/`) is refused, as is one with
    credentials, whitespace or control characters. ValueError with the message."""
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F or ch == "\\" for ch in url):
        raise ValueError("Enter a valid URL (no spaces, backslashes or control characters).")
    try:
        parts = parse_url(url)
    except LocationParseError:
        raise ValueError("Enter a valid URL.") from None
    if parts.scheme not in ("http", "https"):
        raise ValueError("Must start with http:// or https://.")
    if not parts.host:
        raise ValueError("Must name a host.")
    if parts.auth is not None:
        raise ValueError("Must not carry a user name or password.")
    try:
        python_parts = urlsplit(url)
        python_host, python_port = python_parts.hostname, python_parts.port
    except ValueError:
        raise ValueError("Enter a valid URL.") from None
    host = parts.host.strip("[]").lower()
    try:
        same = host_normalize(python_host or "") == host_normalize(host)
    except ValueError:
        same = False
    if not same or python_port != parts.port:
        raise ValueError("Enter a valid URL.")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.scheme, host, port


# --- clients that connect through the guard ---------------------------------------------


class GuardedSMTP(smtplib.SMTP):
    """smtplib.SMTP whose TCP connect goes to a checked address."""

    def _get_socket(self, host, port, timeout):
        if timeout is not None and not timeout:
            raise ValueError("Non-blocking socket (timeout=0) is not supported")
        return connect_checked(host, port, timeout, self.source_address)


class GuardedSMTP_SSL(smtplib.SMTP_SSL, GuardedSMTP):  # noqa: N801 - smtplib's name
    """smtplib.SMTP_SSL over GuardedSMTP's connect; SNI and the certificate check keep
    the host name (SMTP_SSL wraps with server_hostname=self._host)."""


class GuardedIMAP4(imaplib.IMAP4):
    """imaplib.IMAP4 whose TCP connect goes to a checked address."""

    def _create_socket(self, timeout):
        if timeout is not None and not timeout:
            raise ValueError("Non-blocking socket (timeout=0) is not supported")
        return connect_checked(self.host, self.port, timeout)


class GuardedIMAP4_SSL(imaplib.IMAP4_SSL):  # noqa: N801 - imaplib's name
    """imaplib.IMAP4_SSL over a checked connect; SNI and the certificate check keep the
    host name."""

    def _create_socket(self, timeout):
        if timeout is not None and not timeout:
            raise ValueError("Non-blocking socket (timeout=0) is not supported")
        sock = connect_checked(self.host, self.port, timeout)
        return self.ssl_context.wrap_socket(sock, server_hostname=self.host)


if TYPE_CHECKING:
    _ConnectionBase = HTTPConnection  # what the mixin is mixed into
else:
    _ConnectionBase = object


class _GuardedConnectionMixin(_ConnectionBase):
    """urllib3 2.x: resolve, check, then connect to the checked address. The Host
    header and TLS use `self.host`; only the TCP connect is pinned."""

    def request(self, method, url, body=None, headers=None, **kwargs) -> None:
        # Each request on this connection (new or kept alive) is its deadline's to cut
        # off (config.outbound_deadline), and no earlier request's.
        deadline_watch.connection_taken(self, deadline_current())
        super().request(method, url, body=body, headers=headers, **kwargs)

    def _new_conn(self) -> socket.socket:
        try:
            addresses = resolve_checked(self._dns_host, self.port)
        except socket.gaierror as e:
            raise NameResolutionError(self.host, self, e) from e
        deadline = deadline_current()
        last_error: OSError | None = None
        for ip in addresses:
            timeout = self.timeout
            if deadline is not None:  # no connect outlasts the request's deadline
                timeout = deadline.bound(timeout)
            try:
                sock = urllib3_connection.create_connection(
                    (str(ip), self.port),
                    timeout,
                    source_address=self.source_address,
                    socket_options=self.socket_options,
                )
                if deadline is not None:  # a TLS handshake on it is cut off too
                    deadline.socket_connected(sock)
                return sock
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


def guarded_pool_manager(*, num_pools: int, maxsize: int) -> PoolManager:
    """urllib3 connection pools whose every connection passes the guard: `num_pools`
    hosts kept (the least recently used one's connections closed beyond that), `maxsize`
    idle connections kept per host. Thread-safe: a process's threads share one, and so
    its open connections. No proxy from the environment: it would make the connect go
    somewhere the guard never checked. HTTPS is verified against certifi's CA bundle
    (requests' own)."""
    manager = PoolManager(
        num_pools=num_pools,
        maxsize=maxsize,
        cert_reqs="CERT_REQUIRED",
        ca_certs=DEFAULT_CA_BUNDLE_PATH,
    )
    manager.pool_classes_by_scheme = {"http": _GuardedHTTPPool, "https": _GuardedHTTPSPool}
    return manager
