"""Tests for client IP parsing and the fixed anonymisation rule."""

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from privacy.ipaddr import (
    address_spellings,
    anonymise_address,
    anonymise_addresses_in,
    anonymise_ip,
    anonymise_request_texts,
    own_hosts,
    parse_client_ip,
)

LOW_80_BITS = (1 << 80) - 1
IPV6_48_MASK = ((1 << 128) - 1) ^ LOW_80_BITS

ipv6_unmapped = (
    st.integers(0, 2**128 - 1)
    .map(ipaddress.IPv6Address)
    .filter(lambda address: address.ipv4_mapped is None)
)
zone_ids = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789.-_", min_size=1, max_size=12)
address_like_text = st.text(alphabet="0123456789abcdefABCDEF:.%[]/ \tx", max_size=45)
anonymised_ipv4_text = st.integers(0, 2**24 - 1).map(
    lambda prefix: str(ipaddress.IPv4Address(prefix << 8))
)
anonymised_ipv6_text = st.integers(0, 2**48 - 1).map(
    lambda prefix: ipaddress.IPv6Address(prefix << 80).compressed
)


def test_ipv4_keeps_three_octets_and_zeroes_the_last() -> None:
    assert anonymise_ip("203.0.113.77") == "203.0.113.0"


def test_ipv6_is_cut_to_a_48_prefix() -> None:
    assert anonymise_ip("2001:db8:abcd:12::1") == "2001:db8:abcd::"


def test_ipv6_result_is_rendered_compressed() -> None:
    assert anonymise_ip("2001:0DB8:0000:ffff:0000:0000:0000:0001") == "2001:db8::"


def test_ipv4_mapped_ipv6_is_anonymised_as_the_ipv4_it_carries() -> None:
    assert anonymise_ip("::ffff:203.0.113.77") == "203.0.113.0"


def test_ipv4_mapped_ipv6_in_hex_notation_is_anonymised_as_ipv4() -> None:
    assert anonymise_ip("::ffff:cb00:714d") == "203.0.113.0"


def test_a_zone_id_is_dropped_before_anonymising() -> None:
    assert anonymise_ip("fe80::1%eth0") == "fe80::"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("  203.0.113.77\n", "203.0.113.0"),
        ("[2001:db8::1]", "2001:db8::"),
        (" [2001:db8:abcd:12::1] ", "2001:db8:abcd::"),
        ("[fe80::1%eth0]", "fe80::"),
        ("[::ffff:203.0.113.77]", "203.0.113.0"),
    ],
)
def test_surrounding_whitespace_and_brackets_are_tolerated(raw: str, expected: str) -> None:
    assert anonymise_ip(raw) == expected


@pytest.mark.parametrize(
    "raw",
    [
        None,
        "",
        "   ",
        "[]",
        "not an ip",
        "localhost",
        "203.0.113",
        "203.0.113.256",
        "203.0.113.77.1",
        "01.2.3.4",
        "203.0.113.77:8080",
        "203.0.113.0/24",
        "203.0.113.77%eth0",
        "2001:db8::1::2",
        "[2001:db8::1]:443",
        "[2001:db8::1",
        "%eth0",
        "203.0.113.77, 198.51.100.1",
    ],
)
def test_malformed_or_empty_input_gives_none(raw: str | None) -> None:
    assert anonymise_ip(raw) is None
    assert parse_client_ip(raw) is None


def test_parse_client_ip_keeps_every_bit_of_the_address() -> None:
    full_address = ipaddress.IPv6Address("2001:db8:abcd:12::1")
    assert parse_client_ip(" [2001:db8:abcd:12::1] ") == full_address
    assert parse_client_ip("203.0.113.77") == ipaddress.IPv4Address("203.0.113.77")


def test_parse_client_ip_returns_the_ipv4_carried_by_a_mapped_address() -> None:
    assert parse_client_ip("::ffff:203.0.113.77") == ipaddress.IPv4Address("203.0.113.77")


def test_parse_client_ip_drops_the_zone_id() -> None:
    parsed = parse_client_ip("fe80::1%eth0")
    assert isinstance(parsed, ipaddress.IPv6Address)
    assert parsed.scope_id is None
    assert str(parsed) == "fe80::1"


@given(st.ip_addresses(v=4))
def test_any_ipv4_ends_in_zero_and_keeps_its_first_three_octets(
    address: ipaddress.IPv4Address,
) -> None:
    result = anonymise_ip(str(address))
    assert result is not None
    assert result.endswith(".0")
    assert result.split(".")[:3] == str(address).split(".")[:3]


@given(ipv6_unmapped)
def test_any_ipv6_keeps_exactly_its_48_prefix(address: ipaddress.IPv6Address) -> None:
    result = anonymise_ip(address.exploded)
    assert result is not None
    anonymised = ipaddress.IPv6Address(result)
    assert int(anonymised) & LOW_80_BITS == 0
    assert int(anonymised) == int(address) & IPV6_48_MASK
    assert result == anonymised.compressed


@given(st.ip_addresses(v=4))
def test_any_mapped_address_gives_the_same_result_as_its_ipv4(
    address: ipaddress.IPv4Address,
) -> None:
    assert anonymise_ip(f"::ffff:{address}") == anonymise_ip(str(address))


@given(ipv6_unmapped, zone_ids, st.sampled_from(["", " ", "\t"]), st.booleans())
def test_decoration_around_an_ipv6_address_does_not_change_the_result(
    address: ipaddress.IPv6Address, zone: str, padding: str, bracketed: bool
) -> None:
    decorated = f"{address}%{zone}"
    if bracketed:
        decorated = f"[{decorated}]"
    assert anonymise_ip(f"{padding}{decorated}{padding}") == anonymise_ip(str(address))


@given(
    st.one_of(
        st.text(),
        address_like_text,
        st.ip_addresses().map(str),
        anonymised_ipv4_text,
        anonymised_ipv6_text,
    )
)
def test_any_text_never_raises_and_is_echoed_only_when_already_anonymised(raw: str) -> None:
    result = anonymise_ip(raw)
    if result is None:
        return
    assert anonymise_ip(result) == result
    if result == raw:
        address = ipaddress.ip_address(raw)
        host_bits = 0xFF if address.version == 4 else LOW_80_BITS
        assert int(address) & host_bits == 0


def _through_address_objects(raw: str) -> str | None:
    """The anonymised form worked out by `ipaddress` alone, without any shortcut."""
    address = parse_client_ip(raw)
    return anonymise_address(address) if address is not None else None


#: Dotted texts that look like IPv4 addresses and often are not: octets past 255, leading
#: zeros, too many digits, digits of other scripts, missing or extra groups.
octet_like_text = st.one_of(
    st.integers(0, 255).map(str),
    st.integers(256, 9999).map(str),
    st.integers(0, 255).map(lambda octet: f"0{octet}"),
    st.text(alphabet="0123456789\u0663\uff11", min_size=1, max_size=3))
ipv4_like_text = st.one_of(
    st.lists(octet_like_text, min_size=4, max_size=4).map(".".join),
    st.lists(octet_like_text, min_size=3, max_size=5).map(".".join))


@given(st.one_of(ipv4_like_text, st.ip_addresses(v=4).map(str), address_like_text))
def test_the_quick_ipv4_path_answers_as_ipaddress_does(raw: str) -> None:
    assert anonymise_ip(raw) == _through_address_objects(raw)
    spelled = address_spellings(raw)
    if _through_address_objects(raw) is None:
        assert spelled is None
    else:
        assert spelled is not None and spelled[1] == _through_address_objects(raw)


@pytest.mark.parametrize(("raw", "spellings"), [
    ("203.0.113.77", ("203.0.113.77",)),
    (" 203.0.113.77 ", ("203.0.113.77",)),
    ("::ffff:203.0.113.77", ("::ffff:203.0.113.77", "203.0.113.77")),
    ("2001:db8::1", ("2001:db8::1", "2001:0db8:0000:0000:0000:0000:0000:0001")),
    ("2001:DB8::1", ("2001:DB8::1", "2001:0db8:0000:0000:0000:0000:0000:0001", "2001:db8::1")),
])
def test_address_spellings_are_the_text_as_sent_and_its_canonical_forms(
    raw: str, spellings: tuple[str, ...]
) -> None:
    found = address_spellings(raw)
    assert found is not None
    assert found[0] == spellings
    assert found[1] == anonymise_ip(raw)


@pytest.mark.parametrize("raw", [None, "", "not an address", "203.0.113.256", "010.0.0.1"])
def test_address_spellings_of_no_address_is_none(raw: str | None) -> None:
    assert address_spellings(raw) is None


@pytest.mark.parametrize(("text", "expected"), [
    ("https://shop.example/?from=203.0.113.77", "https://shop.example/?from=203.0.113.0"),
    ("http://[2001:db8:abcd:12::7]/admin", "http://[2001:db8:abcd::]/admin"),
    ("Order for 2001:db8:abcd:12::7 (198.51.100.23)", "Order for 2001:db8:abcd:: (198.51.100.0)"),
    ("Sale 10:00-12:00, 1.2.3 items, Foo::bar", "Sale 10:00-12:00, 1.2.3 items, Foo::bar"),
    ("", ""),
])
def test_addresses_written_in_free_text_are_anonymised(text: str, expected: str) -> None:
    assert anonymise_addresses_in(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("at f (http://127.0.0.1:8080/a.js:1:2) for 127.0.0.1",
     "at f (http://127.0.0.1:8080/a.js:1:2) for 127.0.0.0"),
    ("http://[2001:db8::7]/cart from http://[2001:db8::8]/",
     "http://[2001:db8::7]/cart from http://[2001:db8::]/"),
    ("http://user@127.0.0.1/ and //127.0.0.1/x", "http://user@127.0.0.1/ and //127.0.0.1/x"),
])
def test_the_sites_own_host_in_a_url_is_kept_and_every_other_address_anonymised(
        text: str, expected: str) -> None:
    own = own_hosts(["http://127.0.0.1:8080", "https://[2001:db8:0::7]", "https://shop.example"])
    assert anonymise_addresses_in(text, own=own) == expected
    # The visitor's own address is replaced however it is written, but for the shop's host.
    visitor = address_spellings("127.0.0.1")
    assert anonymise_addresses_in("http://127.0.0.1:8080/?ip=127.0.0.1", visitor, own) == (
        "http://127.0.0.1:8080/?ip=127.0.0.0")


@given(st.ip_addresses(v=6), st.sampled_from(["{}", "at {} now", "[{}]:80", "x={}&y=1"]))
def test_any_ipv6_address_in_text_keeps_only_its_48_prefix(
        address: ipaddress.IPv6Address, template: str) -> None:
    text = template.format(address.compressed)
    expected = template.format(anonymise_ip(address.compressed))
    assert anonymise_addresses_in(text) == expected


def test_request_texts_of_an_item_are_anonymised_and_other_fields_left() -> None:
    item = {"url": "https://shop.example/?ip=203.0.113.77", "title": "From 2001:db8:1:2::9",
            "referrer": "http://198.51.100.23/", "visitorId": "203.0.113.77"}
    anonymise_request_texts(item)
    assert item == {"url": "https://shop.example/?ip=203.0.113.0",
                    "title": "From 2001:db8:1::", "referrer": "http://198.51.100.0/",
                    "visitorId": "203.0.113.77"}
