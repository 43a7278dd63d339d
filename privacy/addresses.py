"""The one address guard for every server-side fetch: webhooks and the heatmap renderer.

A URL the service fetches on someone else's say (a webhook a site admin saved, a stylesheet a
recorded page links to) must not reach inside our own network (SSRF). Refused are hosts that
are, or resolve to, an address that is not globally routable: loopback, private, link-local
(with the cloud metadata address 169.254.169.254), unique-local (with fd00:ec2::254), CGNAT,
multicast, reserved and unspecified addresses, and addresses that carry one of those inside a
translation form: IPv4-mapped (::ffff:0:0/96), NAT64 (64:ff9b::/96; the local-use
64:ff9b:1::/48 is refused outright, its embedding is the operator's choice), 6to4 (2002::/16)
and Teredo (2001::/32, refused outright). `localhost` names are refused without asking DNS.

Two checks, because a name's DNS answer can change between them (DNS rebinding): `check_url`
when a URL is accepted, and `PublicOnlyResolver` inside the HTTP client, so the addresses the
client connects to are the ones checked. `guarded_http_client` builds such a client.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from typing import Any
from urllib.parse import urlsplit

from tornado.httpclient import AsyncHTTPClient
from tornado.netutil import DefaultLoopResolver, Resolver

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

#: A name that does not resolve within this many seconds is not refused by `check_url`; the
#: client's own resolver checks it again when it connects.
RESOLVE_TIMEOUT_SECONDS = 3.0

_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")
_TEREDO = ipaddress.ip_network("2001::/32")
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")  # deprecated ::a.b.c.d, ::1 and :: among them
_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_METADATA = {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}
#: Deprecated ranges the standard library still calls global.
_DEPRECATED = [ipaddress.ip_network("fec0::/10"),  # IPv6 site-local
               ipaddress.ip_network("192.88.99.0/24")]  # 6to4 relay anycast


class ForbiddenAddress(Exception):
    """A URL's host is, or resolves to, an address no server-side fetch may reach."""


def forbidden_reason(address: str | Address) -> str | None:
    """Why no server-side fetch may reach `address` (e.g. "loopback"), or None when it may."""
    if isinstance(address, str):
        address = ipaddress.ip_address(address.split("%", 1)[0])  # drop an IPv6 zone id
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            inner = forbidden_reason(embedded)
            return f"{inner} (translated)" if inner else None
        if address in _NAT64_LOCAL or address in _TEREDO:
            return "translated"
    if address in _METADATA:
        return "metadata"
    for reason, matches in (
        ("unspecified", address.is_unspecified), ("loopback", address.is_loopback),
        ("link-local", address.is_link_local), ("multicast", address.is_multicast),
        ("CGNAT", isinstance(address, ipaddress.IPv4Address) and address in _CGNAT),
        ("private", address.is_private), ("reserved", address.is_reserved),
        ("deprecated", any(address in network for network in _DEPRECATED
                           if network.version == address.version)),
        ("not globally routable", not address.is_global),
    ):
        if matches:
            return reason
    return None


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv4-mapped, NAT64, 6to4 or IPv4-compatible address carries."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64 or (address in _IPV4_COMPATIBLE and int(address) > 0xFFFF):
        return ipaddress.IPv4Address(int(address) & 0xFFFF_FFFF)
    return None


def is_forbidden_address(address: str | Address) -> bool:
    """True for an address no server-side fetch may reach."""
    return forbidden_reason(address) is not None


def url_host(url: str, *, schemes: tuple[str, ...] = ("http", "https")) -> tuple[str, int]:
    """The URL's host (lower case, no brackets) and port; ValueError when it has none or its
    scheme is not one of `schemes` (so no file:, data: or ftp: fetches)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").rstrip(".").lower()
    port = parts.port  # ValueError for a port out of range
    # The resolver encodes the name with IDNA; a host it cannot encode (stray surrogates,
    # control characters, empty or over-long labels) is no host at all.
    host.encode("idna")
    if scheme not in schemes or not host:
        raise ValueError(f"needs {' or '.join(schemes)} and a host")
    return host, port or {"http": 80, "https": 443}.get(scheme, 0)


async def check_url(url: str, *, resolver: Resolver | None = None) -> None:
    """Raise ForbiddenAddress when the URL's host is or resolves to a forbidden address.

    ValueError when the URL has no http(s) scheme or no valid host. A name that does not
    resolve now is let through: the client's `PublicOnlyResolver` checks it when connecting.
    """
    host, port = url_host(url)
    if host == "localhost" or host.endswith(".localhost"):
        raise ForbiddenAddress("loopback")
    try:
        addresses: list[str] = [str(ipaddress.ip_address(host))]
    except ValueError:
        try:
            found = await asyncio.wait_for(
                (resolver or DefaultLoopResolver()).resolve(host, port, socket.AF_UNSPEC),
                RESOLVE_TIMEOUT_SECONDS)
        except (OSError, TimeoutError):
            return
        addresses = [str(sockaddr[0]) for _family, sockaddr in found]
    for address in addresses:
        reason = forbidden_reason(address)
        if reason:
            raise ForbiddenAddress(reason)


class PublicOnlyResolver(Resolver):
    """A resolver keeping only the addresses a server-side fetch may reach (no SSRF by DNS)."""

    def initialize(self, inner: Resolver | None = None) -> None:  # type: ignore[override]
        """Wrap `inner` (the loop's own resolver by default)."""
        self._inner = inner or DefaultLoopResolver()

    async def resolve(self, host: str, port: int, family: socket.AddressFamily = socket.AF_UNSPEC
                      ) -> list[tuple[int, Any]]:
        """The host's addresses, minus forbidden ones; ForbiddenAddress when none is left."""
        if host.rstrip(".").lower() == "localhost" or host.rstrip(".").lower().endswith(
                ".localhost"):
            raise ForbiddenAddress("loopback")
        found = await self._inner.resolve(host, port, family)
        allowed = [(kind, sockaddr) for kind, sockaddr in found
                   if not is_forbidden_address(sockaddr[0])]
        if not allowed:
            raise ForbiddenAddress(forbidden_reason(found[0][1][0]) or "no address")
        return allowed


def guarded_http_client(*, allow_private: bool, **options: Any) -> AsyncHTTPClient:
    """An HTTP client of its own (close it when done) that connects only to addresses a
    server-side fetch may reach; `allow_private` (a documented setting, off by default) lets it
    reach any address, for tests and receivers on the operator's own network."""
    resolver = DefaultLoopResolver() if allow_private else PublicOnlyResolver()
    return AsyncHTTPClient(force_instance=True, resolver=resolver, **options)
