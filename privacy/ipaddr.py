"""Client IP parsing and the legally required anonymisation applied before anything is stored.

The anonymisation rule is fixed by law and deliberately has no setting:

* IPv4: the last octet is zeroed (``203.0.113.77`` -> ``203.0.113.0``).
* IPv6: only the /48 prefix is kept, rendered compressed
  (``2001:db8:abcd:12::1`` -> ``2001:db8:abcd::``).
* IPv4-mapped IPv6 (``::ffff:203.0.113.77``) is treated as the IPv4 address it carries.

Input is normalised before parsing: surrounding whitespace and one pair of enclosing brackets
(``[2001:db8::1]``) are removed, and an IPv6 zone id (``fe80::1%eth0``) is dropped. Anything that
is still not a plain address (ports, host names, CIDR suffixes, empty text) yields ``None``.
"""

import ipaddress
import re
from collections.abc import Iterable
from urllib.parse import urlsplit

ClientAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

IPV4_KEPT_PREFIX_BITS = 24
IPV6_KEPT_PREFIX_BITS = 48


def parse_client_ip(raw: str | None) -> ClientAddress | None:
    """Parse a client address with the same normalisation as anonymise_ip, keeping every bit."""
    if not isinstance(raw, str):
        return None
    text = raw.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    # A zone id names the interface on the capturing host; it says nothing about the client and
    # ipaddress would otherwise carry it into the rendered address.
    if ":" in text:
        text = text.split("%", 1)[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


#: An IPv4 address exactly as `ipaddress` writes it: four decimal octets of 0-255 without
#: leading zeros. Such a text is its own only spelling, and anonymising it is cutting the last
#: octet; ASCII digits only, as `ipaddress` takes no other digits.
_CANONICAL_IPV4 = re.compile(r"(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}"
                             r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])")


def _anonymised_canonical_ipv4(raw: str) -> str | None:
    """The anonymised form of an IPv4 address written as `ipaddress` writes it, else None."""
    # Most addresses arrive written that way; they need no address object, which costs several
    # times the regular expression, on every request and every address literal in an error.
    if _CANONICAL_IPV4.fullmatch(raw):
        return raw[:raw.rindex(".")] + ".0"
    return None


def anonymise_ip(raw: str | None) -> str | None:
    """Return the anonymised form of a client address, or None when it is not a valid address."""
    if isinstance(raw, str) and (quick := _anonymised_canonical_ipv4(raw)) is not None:
        return quick
    address = parse_client_ip(raw)
    return anonymise_address(address) if address is not None else None


def address_spellings(raw: str | None) -> tuple[tuple[str, ...], str] | None:
    """How a client address may be written out, and its anonymised form; None if not valid.

    The spellings are the text as sent (stripped) and the address's canonical forms, without
    repeats: what to look for when removing the address from free text.
    """
    if isinstance(raw, str) and (quick := _anonymised_canonical_ipv4(raw)) is not None:
        return (raw,), quick
    address = parse_client_ip(raw)
    if address is None or not isinstance(raw, str):
        return None
    spellings = tuple(dict.fromkeys((raw.strip(), address.exploded, address.compressed)))
    return spellings, anonymise_address(address)


#: The bits each family keeps, as masks over the address as an integer.
_IPV4_KEPT_MASK = ((1 << IPV4_KEPT_PREFIX_BITS) - 1) << (32 - IPV4_KEPT_PREFIX_BITS)
_IPV6_KEPT_MASK = ((1 << IPV6_KEPT_PREFIX_BITS) - 1) << (128 - IPV6_KEPT_PREFIX_BITS)


def anonymise_address(address: ClientAddress) -> str:
    """The anonymised form of an address already parsed by parse_client_ip."""
    # Masking the integer gives the network address of the kept prefix, like ip_network(...,
    # strict=False).network_address, without building a network object per request.
    if isinstance(address, ipaddress.IPv4Address):
        return str(ipaddress.IPv4Address(int(address) & _IPV4_KEPT_MASK))
    return ipaddress.IPv6Address(int(address) & _IPV6_KEPT_MASK).compressed


#: An IPv4 address in free text: four groups of up to three digits, on word boundaries.
_IPV4_IN_TEXT = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}\b")
#: Found in every text `_IPV4_IN_TEXT` finds a valid address in; several times faster to search
#: for (it starts with a digit, not a word boundary), and most texts hold version or line
#: numbers but no address.
_IPV4_HINT = re.compile(r"[0-9]\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]")
#: An IPv6 candidate in free text: hex groups with two or more colons, perhaps an IPv4 tail and a
#: zone id, standing apart from words, so `Cache::add` or `std::vector` are never taken for one.
#: Each candidate is still parsed; what does not parse is left as it is.
_IPV6_IN_TEXT = re.compile(
    r"(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:\d{1,3}(?:\.\d{1,3}){3}|[0-9A-Fa-f]{1,4})?"
    r"(?:%[0-9A-Za-z]+)?(?![\w:])")


#: What stands right before the host of a URL: `scheme://`, a protocol-relative `//`, a user
#: name's `@`, and the `[` of an IPv6 host.
_URL_HOST_LEAD = re.compile(r"(?://|@)\[?$")

OwnHosts = frozenset[ipaddress.IPv4Address | ipaddress.IPv6Address]


def own_hosts(origins: Iterable[str]) -> OwnHosts:
    """The addresses among a site's own hosts (the hosts of its allowed origins). A shop served
    from an IP address is not a visitor: its host stays in its URLs, or every link is dead."""
    hosts = set()
    for origin in origins:
        try:
            hosts.add(ipaddress.ip_address(urlsplit(origin).hostname or ""))
        except ValueError:
            continue
    return frozenset(hosts)


def _is_own_url_host(found: re.Match[str], own: OwnHosts) -> bool:
    """Whether the address found is the host of a URL and one of the site's own hosts."""
    if not own or _URL_HOST_LEAD.search(found.string, max(0, found.start() - 3),
                                        found.start()) is None:
        return False
    try:
        return ipaddress.ip_address(found.group(0)) in own
    except ValueError:
        return False


def anonymise_addresses_in(text: str, visitor: tuple[tuple[str, ...], str] | None = None,
                           own: OwnHosts = frozenset()) -> str:
    """`text` with every IPv4 and IPv6 address written in it replaced by its anonymised form,
    but for a URL's host that is one of the site's `own` hosts; `visitor` (`address_spellings`)
    is replaced however the visitor's own address is written, with the same exception."""

    def anonymised(found: re.Match[str]) -> str:
        if _is_own_url_host(found, own):
            return found.group(0)
        return anonymise_ip(found.group(0)) or found.group(0)

    if visitor is not None:
        spellings, anonymised_visitor = visitor
        for full in spellings:
            if full in text:
                text = re.sub(re.escape(full), lambda found: (
                    found.group(0) if _is_own_url_host(found, own) else anonymised_visitor),
                    text)
    # Every address written out holds a dot or a colon; most short texts hold neither.
    if ":" in text:
        text = _IPV6_IN_TEXT.sub(anonymised, text)
    if "." in text and _IPV4_HINT.search(text) is not None:
        text = _IPV4_IN_TEXT.sub(anonymised, text)
    return text


#: The free texts of an item that come from the visitor's request, not from the shop.
REQUEST_TEXT_FIELDS = ("url", "title", "referrer", "pageUrl")


def anonymise_request_texts(item: dict[str, object], own: OwnHosts = frozenset()) -> None:
    """Anonymise the addresses in the item's request texts (URL, title, referrer), in place,
    but for the site's `own` hosts in its URLs."""
    for field in REQUEST_TEXT_FIELDS:
        value = item.get(field)
        if isinstance(value, str) and value:
            item[field] = anonymise_addresses_in(value, own=own)
