"""Country and time-zone lookup for client addresses from a local MaxMind-format (.mmdb) database.

Understood record shapes, so that any of the common free or commercial files can be configured:

* MaxMind GeoIP2 / GeoLite2 Country and City, DB-IP lite country and city:
  ``{"country": {"iso_code": "DE", ...}, "location": {"time_zone": "Europe/Berlin", ...}}``.
  ``location.time_zone`` is optional (country databases and DB-IP lite have none).
* ip-location-db style flat records: ``{"country_code": "DE"}``.

Privacy: the full client address is handed to ``lookup`` only to find its network in the
database. Nothing in this module logs, stores, caches or returns the address, and lookup errors
(whose messages would quote it) are swallowed without being recorded.
"""

import ipaddress
from dataclasses import dataclass
from typing import Protocol

import maxminddb

ClientAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# "ZZ" is the user-assigned ISO code DB-IP and others use for "unknown or reserved"; reporting it
# as a country would put a fake country into visitor statistics.
_UNKNOWN_COUNTRY_CODES = frozenset({"ZZ"})


@dataclass(frozen=True, slots=True)
class GeoResult:
    """Where a client address is, as far as the database knows; None means unknown."""

    country: str | None = None
    time_zone: str | None = None


_UNKNOWN = GeoResult()


class _Metadata(Protocol):
    """The metadata field this module reads from a maxminddb reader."""

    database_type: str


class _Reader(Protocol):
    """The part of a maxminddb reader used here, shared by its C and pure-Python readers."""

    def get(self, ip_address: ClientAddress) -> object:
        """Return the record of the network containing ip_address, or None."""
        ...

    def metadata(self) -> _Metadata:
        """Return the database's metadata."""
        ...

    def close(self) -> None:
        """Release the file."""
        ...


class CountryResolver:
    """Looks client addresses up in one .mmdb file, opened once and memory-mapped.

    The full client IP is passed in only for this lookup: the resolver never logs it, never keeps
    it and never puts it into an exception. Safe to share between coroutines on one event loop.
    """

    def __init__(self, path: str) -> None:
        """Open the database at path, raising ValueError naming the path when it is unusable."""
        try:
            reader: _Reader = maxminddb.open_database(path, maxminddb.MODE_AUTO)
        except (OSError, ValueError, maxminddb.InvalidDatabaseError) as error:
            # OSError: missing or unreadable; ValueError: e.g. an empty file cannot be mapped;
            # InvalidDatabaseError: readable but not an .mmdb. All mean the setting is wrong.
            raise ValueError(
                f"cannot open country database {path!r}: {error.__class__.__name__}: {error}"
            ) from error
        metadata = reader.metadata()
        self._reader: _Reader | None = reader
        self._path = path
        self._database_type = str(metadata.database_type)

    @property
    def path(self) -> str:
        """Return the file this resolver reads."""
        return self._path

    @property
    def database_type(self) -> str:
        """Return the database type named in the file's metadata, e.g. 'GeoLite2-Country'."""
        return self._database_type

    def lookup(self, ip: ClientAddress | None) -> GeoResult:
        """Return the country and time zone of a public address; unknown parts are None."""
        address = _public_address(ip)
        if address is None or self._reader is None:
            return _UNKNOWN
        try:
            record = self._reader.get(address)
        except (ValueError, TypeError, maxminddb.InvalidDatabaseError):
            # Raised for an IPv6 address asked of an IPv4-only file, a closed reader or a damaged
            # file: each must cost the visit its country, not the request. The error text quotes
            # the address, so it is deliberately neither logged nor re-raised.
            return _UNKNOWN
        return _result_from_record(record)

    def close(self) -> None:
        """Release the database file; later lookups return an unknown result."""
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.close()

    def __enter__(self) -> "CountryResolver":
        """Return self so that a with block closes the resolver."""
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Close the database at the end of a with block."""
        self.close()


class NullCountryResolver:
    """Stands in for CountryResolver when no database is configured: every address is unknown."""

    path: str | None = None
    database_type: str | None = None

    def lookup(self, ip: ClientAddress | None) -> GeoResult:
        """Return an unknown result without looking at the address."""
        return _UNKNOWN

    def close(self) -> None:
        """Do nothing; there is no file to release."""

    def __enter__(self) -> "NullCountryResolver":
        """Return self so that both resolvers work the same way in a with block."""
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Do nothing at the end of a with block."""


def open_country_resolver(path: str | None) -> CountryResolver | NullCountryResolver:
    """Open the database at path, or return a resolver that knows nothing when path is None."""
    if path is None:
        return NullCountryResolver()
    return CountryResolver(path)


def _public_address(ip: ClientAddress | None) -> ClientAddress | None:
    """Return the address to look up, or None when no database could meaningfully place it."""
    if not isinstance(ip, ipaddress.IPv4Address | ipaddress.IPv6Address):
        return None
    address: ClientAddress = ip
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        # Dual-stack sockets report IPv4 clients as ::ffff:a.b.c.d; databases file them under
        # the IPv4 address, and the range checks below only recognise the unwrapped form.
        address = address.ipv4_mapped
    if not address.is_global or address.is_multicast:
        # Private, loopback, link-local, shared (CGNAT), documentation and reserved ranges say
        # nothing about where a visitor is, even when a database file carries a record for them.
        return None
    return address


def _result_from_record(record: object) -> GeoResult:
    """Extract the country and time zone from one database record of any understood shape."""
    if not isinstance(record, dict):
        return _UNKNOWN
    country = record.get("country")
    code = country.get("iso_code") if isinstance(country, dict) else record.get("country_code")
    location = record.get("location")
    time_zone = location.get("time_zone") if isinstance(location, dict) else None
    return GeoResult(country=_country_code(code), time_zone=_time_zone(time_zone))


def _country_code(value: object) -> str | None:
    """Return value as an upper-case ISO 3166-1 alpha-2 code, or None when it is not one."""
    if not isinstance(value, str):
        return None
    code = value.strip().upper()
    if len(code) != 2 or not code.isascii() or not code.isalpha():
        return None
    if code in _UNKNOWN_COUNTRY_CODES:
        return None
    return code


def _time_zone(value: object) -> str | None:
    """Return value as a time-zone name such as 'Europe/Berlin', or None when there is none."""
    if not isinstance(value, str) or not value.strip():
        return None
    return value.strip()
