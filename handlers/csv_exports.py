"""CSV exports per site: GET /api/v1/sites/{siteId}/{errors|leads|recordings|orders}.csv.

Rows stream from a database cursor through `csv.writer` on a small buffer that is written and
flushed every FLUSH_ROWS rows, so memory does not grow with the export. At most CSV_ROW_CAP rows
are written. Headers leave before the body, so whether the export is truncated is decided first
by a count bounded at cap + 1 (cheap: it stops counting there) and sent as
`X-Export-Truncated`; the stream itself also asks for cap + 1 rows, and a final marker row is
written when either saw more than the cap, so the file is right even if rows arrived between the
count and the stream. Every cell is neutralised against formula injection (privacy/csv_safety).
Owners and admins only: leads hold personal data, and a file once downloaded escapes the
dashboard's restriction and erasure controls.
"""

from __future__ import annotations

from derived.views import exports
from handlers.site_api import SITE_ID, CsvStreamHandler


class CsvExportHandler(CsvStreamHandler):
    """Streams one kind of the site's records as CSV, newest first, capped at CSV_ROW_CAP."""

    async def get(self, site_id: str, kind: str) -> None:
        site = await self.admin_site(site_id)
        export = exports.CSV_EXPORTS[kind]
        cap = self.deps.settings.csv_row_cap
        counted = await exports.count_export_rows(self.deps.store, export, site["_id"],
                                                  up_to=cap + 1)
        written, truncated = await self.stream_csv(
            f"{kind}-{site_id}.csv", export.columns, counted,
            exports.export_rows(self.deps.store, export, site["_id"], limit=cap + 1))
        await self.audit("site.csv_exported", site,
                         {"kind": kind, "rows": written, "truncated": truncated})
        self.finish()


default_handlers = [
    (rf"/api/v1/sites/{SITE_ID}/(errors|leads|recordings|orders)\.csv", CsvExportHandler),
]
