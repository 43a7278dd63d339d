"""Writes small MaxMind DB (.mmdb) files so geo tests control every network they look up.

Built on the ``mmdb-writer`` package (MIT), which produces files the official readers accept:
an IPv6 search tree with IPv4 networks at ::/96, the data section and the metadata map.
"""

import os
from collections.abc import Sequence

from mmdb_writer import MMDBWriter
from netaddr import IPSet

CountryEntry = tuple[str, str, str | None]


def write_mmdb(
    path: str | os.PathLike[str],
    records: Sequence[tuple[str, object]],
    *,
    ip_version: int = 6,
    database_type: str = "GeoLite2-Country",
) -> None:
    """Write a database mapping each CIDR network to its record; later entries win overlaps."""
    writer = MMDBWriter(
        ip_version=ip_version,
        database_type=database_type,
        languages=["en"],
        description={"en": "Visitor Service test fixture"},
        # Real IPv6 databases answer IPv4 lookups from ::/96; without this the writer refuses
        # IPv4 networks in an IPv6 tree.
        ipv4_compatible=ip_version == 6,
    )
    for network, record in records:
        writer.insert_network(IPSet([network]), record)
    writer.to_db_file(os.fspath(path))


def write_country_mmdb(path: str | os.PathLike[str], entries: Sequence[CountryEntry]) -> None:
    """Write a GeoLite2-shaped country database from (network CIDR, ISO code, time zone) rows."""
    records: list[tuple[str, object]] = []
    for network, iso_code, time_zone in entries:
        # names.en repeats the code because the service reads only the code, never the name.
        record: dict[str, object] = {"country": {"iso_code": iso_code, "names": {"en": iso_code}}}
        if time_zone is not None:
            # Country databases carry no location at all, so a missing zone leaves the key out.
            record["location"] = {"time_zone": time_zone}
        records.append((network, record))
    write_mmdb(path, records)
