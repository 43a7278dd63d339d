"""The address guard every server-side fetch goes through (webhooks, the heatmap renderer)."""

from __future__ import annotations

import socket

import pytest
from tornado.netutil import Resolver

from privacy import addresses

REFUSED: dict[str, str | None] = {
    "127.0.0.1": "loopback",
    "127.9.9.9": "loopback",
    "::1": "loopback",
    "0.0.0.0": "unspecified",
    "::": "unspecified",
    "10.1.2.3": "private",
    "172.16.0.1": "private",
    "192.168.1.1": "private",
    "169.254.169.254": "metadata",
    "fd00:ec2::254": "metadata",
    "169.254.1.1": "link-local",
    "fe80::1": "link-local",
    "fe80::1%eth0": "link-local",
    "fc00::1": "private",  # unique-local
    "fd12:3456::1": "private",
    "100.64.0.1": "CGNAT",
    "100.100.100.200": "CGNAT",
    "224.0.0.1": "multicast",
    "239.1.1.1": "multicast",
    "ff02::1": "multicast",
    # The standard library names these private or reserved, depending on its version.
    "240.0.0.1": None,  # reserved for future use
    "255.255.255.255": None,
    "198.18.0.1": None,  # benchmarking
    "192.0.2.1": None,  # documentation
    "fec0::1": "deprecated",  # site-local
    "192.88.99.1": "deprecated",  # 6to4 relay anycast
    # Translation forms carrying a forbidden IPv4 address.
    "::ffff:127.0.0.1": "loopback (translated)",
    "::ffff:169.254.169.254": "metadata (translated)",
    "64:ff9b::7f00:1": "loopback (translated)",  # NAT64
    "64:ff9b::a00:1": "private (translated)",
    "2002:7f00:1::1": "loopback (translated)",  # 6to4
    "2002:a9fe:a9fe::1": "metadata (translated)",
    "2002:a00:1::1": "private (translated)",
    "::7f00:1": "loopback (translated)",  # IPv4-compatible (deprecated)
    # Refused whatever they carry.
    "64:ff9b:1::5db8:d70e": "translated",  # local-use NAT64
    "2001:0:4136:e378:8000:63bf:3fff:fdd2": "translated",  # Teredo
}

ALLOWED = ["93.184.215.14", "8.8.8.8", "2606:4700::1111", "::ffff:93.184.215.14",
           "64:ff9b::5db8:d70e", "2002:5db8:d70e::1"]


@pytest.mark.parametrize(("address", "reason"), REFUSED.items())
def test_each_class_of_internal_address_is_refused_with_its_reason(address: str,
                                                                  reason: str | None):
    assert addresses.is_forbidden_address(address)
    if reason is not None:
        assert addresses.forbidden_reason(address) == reason


@pytest.mark.parametrize("address", ALLOWED)
def test_public_addresses_and_their_translations_are_allowed(address: str):
    assert addresses.forbidden_reason(address) is None


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:8080/", "http://localhost/", "http://shop.localhost./x",
    "http://[64:ff9b::7f00:1]/", "http://[2002:7f00:1::1]:8080/", "http://[::ffff:10.0.0.1]/",
    "https://169.254.169.254/latest/meta-data/", "http://[fd00:ec2::254]/",
])
async def test_a_url_on_an_internal_host_is_refused(url: str):
    with pytest.raises(addresses.ForbiddenAddress):
        await addresses.check_url(url)


@pytest.mark.parametrize("url", ["file:///etc/passwd", "data:text/plain,hi", "ftp://x.example/",
                                 "gopher://x.example/", "http://", "http://x.example:99999/"])
async def test_a_url_without_an_http_host_is_not_a_url_the_service_fetches(url: str):
    with pytest.raises(ValueError):
        await addresses.check_url(url)


class _Answers(Resolver):
    """A resolver answering from a table, as DNS would."""

    def initialize(self, table: dict[str, list[str]]) -> None:  # type: ignore[override]
        self.table = table

    async def resolve(self, host: str, port: int, family: socket.AddressFamily = socket.AF_UNSPEC
                      ) -> list[tuple[int, tuple]]:
        return [(socket.AF_INET6 if ":" in a else socket.AF_INET, (a, port))
                for a in self.table[host]]


async def test_a_name_is_refused_when_any_of_its_addresses_is_internal():
    dns = _Answers(table={"mixed.example": ["93.184.215.14", "10.0.0.5"],
                          "public.example": ["93.184.215.14"]})
    with pytest.raises(addresses.ForbiddenAddress, match="private"):
        await addresses.check_url("https://mixed.example/", resolver=dns)
    await addresses.check_url("https://public.example/", resolver=dns)


async def test_the_clients_resolver_keeps_only_public_addresses_and_refuses_a_rebound_name():
    dns = _Answers(table={"mixed.example": ["10.0.0.5", "93.184.215.14"],
                          "rebound.example": ["64:ff9b::a9fe:a9fe", "127.0.0.1"]})
    guard = addresses.PublicOnlyResolver(inner=dns)
    assert await guard.resolve("mixed.example", 443) == [(socket.AF_INET, ("93.184.215.14", 443))]
    with pytest.raises(addresses.ForbiddenAddress, match="metadata"):
        await guard.resolve("rebound.example", 443)
    with pytest.raises(addresses.ForbiddenAddress):
        await guard.resolve("localhost", 443)
