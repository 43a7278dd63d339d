"""The toolkit the dashboard's handler modules share, so that none imports a sibling.

`SiteDataHandler` resolves the site for the caller (readable by members, changeable by owners
and admins; a site of another organization is 404) and parses the common query arguments;
`CsvStreamHandler` streams a capped CSV download; `write_export` streams an access export;
`security_headers` are those of every page the dashboard's origin serves. The path patterns
(`SITE_ID`, `UUID`, `CLIENT_ID`) and where the plugin's archive lies are spelled here once.
Answers are written with `BaseHandler.write_json`, which spells every instant as instants.py
does."""

from __future__ import annotations

import csv
import io
from collections.abc import AsyncIterator
from datetime import date
from pathlib import Path
from typing import Any

from derived.views import charts, paging
from documents import sites
from handlers.base import BaseHandler
from privacy.csv_safety import neutralise_row
from privacy.export import VisitorExport
from privacy.subject_data import SubjectKeys

SITE_ID = r"([0-9a-f-]{36})"
UUID = r"([0-9a-f-]{36})"
#: Visitor and lead ids: the characters the ingest schemas allow.
CLIENT_ID = r"([A-Za-z0-9_-]{1,64})"

#: Where `make plugin-zip` builds the WordPress plugin's archive (git-ignored).
PLUGIN_ROOT = Path(__file__).resolve().parent.parent / "dist"
PLUGIN_ARCHIVE = "visitor-service.zip"
#: The archive's public path: the plugin's code is no secret, like /sdk/v1/loader.js.
PLUGIN_DOWNLOAD_PATH = "/downloads/visitor-service.zip"
#: Rows per write-and-flush: big enough for few syscalls, small enough to keep the buffer tiny.
FLUSH_ROWS = 500
#: First cell of the marker row that ends a truncated export.
TRUNCATION_MARKER = "#truncated"
#: Flush the export to the client every this many bytes, so memory stays flat.
EXPORT_FLUSH_BYTES = 64 * 1024


def plugin_archive() -> Path:
    """Where the plugin's archive is; read at each request, so a `make plugin-zip` run after
    the start is offered at once."""
    return PLUGIN_ROOT / PLUGIN_ARCHIVE


def security_headers(public_url: str) -> dict[str, str]:
    """Headers for every UI response; the live socket's ws(s) URL is derived from PUBLIC_URL."""
    socket_origin = public_url.rstrip("/").replace("https://", "wss://", 1).replace(
        "http://", "ws://", 1)
    policy = "; ".join([
        "default-src 'self'",
        "script-src 'self'",
        # Replays rebuild recorded pages, whose inline styles and style attributes rrweb
        # re-applies; styles cannot run code, scripts stay strict.
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data: blob: https:",
        "font-src 'self' data:",
        f"connect-src 'self' {socket_origin}",
        "frame-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ])
    return {
        "Content-Security-Policy": policy,
        "X-Frame-Options": "DENY",
        "Referrer-Policy": "no-referrer",
        "X-Content-Type-Options": "nosniff",
    }


class SiteDataHandler(BaseHandler):
    """Resolves the site for the caller: readable by members, changeable by owners/admins."""

    async def readable_site(self, site_id: str) -> dict[str, Any]:
        """The site, if the user belongs to its organization; NotFound otherwise."""
        return await sites.site_for_user(self.deps.store, self.user, site_id)

    async def admin_site(self, site_id: str) -> dict[str, Any]:
        """The site, if the user is an owner or admin of its organization."""
        site = await self.readable_site(site_id)
        sites.require_admin(self.user, site["organizationId"])
        return site

    def page_arguments(self) -> tuple[str | None, int]:
        """The `cursor` and `limit` query arguments."""
        return (self.get_query_argument("cursor", None) or None,
                paging.page_limit(self.get_query_argument("limit", None)))

    def day_range(self, site: dict[str, Any]) -> tuple[date, date]:
        """The inclusive days of `from` and `to`, the site's (its time zone); the last 30
        days by default, today included."""
        return charts.chart_range(self.get_query_argument("from", None),
                                  self.get_query_argument("to", None),
                                  sites.day_clock(site).today())

    def optional_day(self, name: str) -> date | None:
        """A query argument that is a day like 2026-01-31 in the supported span, or None when
        absent."""
        raw = self.get_query_argument(name, None)
        return charts.parse_day(raw, name) if raw else None

    def optional_flag(self, name: str) -> bool | None:
        """A true/false query argument (the API document has checked its spelling)."""
        raw = self.get_query_argument(name, None)
        return None if not raw else raw == "true"

    def optional_number(self, name: str) -> float | None:
        """A number query argument (checked against the API document), or None."""
        raw = self.get_query_argument(name, None)
        return None if not raw else float(raw)


class CsvStreamHandler(SiteDataHandler):
    """Streams rows as a CSV download, capped at CSV_ROW_CAP, with the truncation marker."""

    async def stream_csv(self, filename: str, columns: tuple[str, ...], counted: int,
                         rows: AsyncIterator[list[Any]]) -> tuple[int, bool]:
        """Write the file; `counted` is the row count bounded at cap + 1. Returns (rows written,
        truncated)."""
        cap = self.deps.settings.csv_row_cap
        self.set_header("Content-Type", "text/csv; charset=utf-8")
        self.set_header("Content-Disposition", f'attachment; filename="{filename}"')
        self.set_header("X-Export-Row-Cap", str(cap))
        self.set_header("X-Export-Truncated", "true" if counted > cap else "false")
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow(columns)
        written = 0
        past_cap = False
        async for row in rows:
            if written == cap:
                past_cap = True
                continue
            writer.writerow(neutralise_row(row))
            written += 1
            if written % FLUSH_ROWS == 0:
                self.write(buffer.getvalue())
                buffer.seek(0)
                buffer.truncate()
                await self.flush()
        truncated = past_cap or counted > cap
        if truncated:
            writer.writerow([TRUNCATION_MARKER,
                             f"this export stops at CSV_ROW_CAP={cap} rows; more exist"])
        self.write(buffer.getvalue())
        return written, truncated


async def write_export(handler: BaseHandler, export: VisitorExport,
                       profile: dict[str, Any] | None, keys: SubjectKeys) -> None:
    """Write the export's fragments, flushed every EXPORT_FLUSH_BYTES so memory stays flat."""
    pending = 0
    async for fragment in export.fragments(profile, keys):
        handler.write(fragment)
        pending += len(fragment)
        if pending >= EXPORT_FLUSH_BYTES:
            await handler.flush()
            pending = 0
