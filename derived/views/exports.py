"""The CSV exports: what each kind lists (its columns, collection and order), how a document
becomes a row, and the rows themselves, newest first. The exports open their family's
collection by its constant (tests/documents/test_collection_owners.py).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from derived.views.errors import error_summary
from derived.views.leads import lead_view
from derived.views.paging import not_restricted, readable
from derived.views.recordings import recording_summary
from documents import commerce, error_records, leads, recordings
from documents.store import DESCENDING, Store


@dataclass(frozen=True)
class CsvExport:
    """What one CSV export lists: its columns, query, order and how a document becomes a row."""

    kind: str
    collection: str
    columns: tuple[str, ...]
    sort_field: str

    def row(self, document: dict[str, Any]) -> list[Any]:
        """The document's cells, in column order."""
        return _ROW_MAKERS[self.kind](document)


def _error_row(error: dict[str, Any]) -> list[Any]:
    view = error_summary(error)
    return [view["id"], view["type"], view["message"], view["source"], view["status"],
            view["occurrenceCount"], view["firstSeen"], view["lastSeen"]]


def _lead_row(lead: dict[str, Any]) -> list[Any]:
    view = lead_view(lead)
    return [view["id"], view["createdAt"], view["visitorId"], view["kind"], view["name"],
            view["email"], view["phone"], view["url"], view["formId"],
            json.dumps(view["fields"], ensure_ascii=False, sort_keys=True, default=str),
            view["orderCompleted"], *_cart_cells(lead.get("cart"))]


def _cart_cells(cart: Any) -> list[Any]:
    """The checkout's cart value and currency as the lead carries them (sent by the shop)."""
    if not isinstance(cart, dict):
        return ["", ""]
    return [cart.get("total", ""), cart.get("currency", "")]


def _order_row(order: dict[str, Any]) -> list[Any]:
    view = commerce.order_view(order)
    currency = view["currency"]
    refunded = commerce.decimal_text(view["refunded"], currency) if currency else ""
    return [view["orderId"], view["placedAt"], view["paidAt"], view["visitorId"],
            view["sessionId"], view["status"], currency, view["totalText"], refunded,
            view["netText"]]


def _recording_row(recording: dict[str, Any]) -> list[Any]:
    view = recording_summary(recording)
    return [view["id"], view["visitorId"], view["sessionId"], view["status"],
            view["startedAt"], view["endedAt"], view["duration"], view["pageUrl"],
            view["pageCount"]]


_ROW_MAKERS = {"errors": _error_row, "leads": _lead_row, "recordings": _recording_row,
               "orders": _order_row}

CSV_EXPORTS = {
    "errors": CsvExport("errors", error_records.ERRORS,
                        ("id", "type", "message", "source", "status", "occurrenceCount",
                         "firstSeen", "lastSeen"), "lastSeen"),
    "leads": CsvExport("leads", leads.COLLECTION,
                       ("id", "createdAt", "visitorId", "kind", "name", "email", "phone", "url",
                        "formId", "fields", "orderCompleted", "cartTotal", "cartCurrency"),
                       "createdAt"),
    "recordings": CsvExport("recordings", recordings.COLLECTION,
                            ("id", "visitorId", "sessionId", "status", "startedAt", "endedAt",
                             "durationSeconds", "firstPageUrl", "pageCount"), "startedAt"),
    # Orders the shop's server reported (documents/commerce.py): value and currency as
    # decimal text, never converted.
    "orders": CsvExport("orders", commerce.ORDERS,
                        ("orderId", "placedAt", "paidAt", "visitorId", "sessionId", "status",
                         "currency", "total", "refunded", "netRevenue"), "placedAt"),
}


async def _export_filter(store: Store, export: CsvExport, site_id: str) -> dict[str, Any]:
    if export.kind == "errors":
        return {"siteId": site_id}
    kept = commerce.KEPT if export.collection == commerce.ORDERS else {}
    return {"siteId": site_id, **kept, **await not_restricted(store, site_id)}


async def count_export_rows(store: Store, export: CsvExport, site_id: str, *, up_to: int) -> int:
    """How many rows the export has, counting no further than `up_to`."""
    return await store.collection(export.collection).count_documents(
        await _export_filter(store, export, site_id), limit=up_to)


async def export_rows(store: Store, export: CsvExport, site_id: str, *, limit: int
                      ) -> AsyncIterator[list[Any]]:
    """The export's rows, newest first, one cursor batch in memory at a time."""
    cursor = store.collection(export.collection).find(
        await _export_filter(store, export, site_id)).sort(
        [(export.sort_field, DESCENDING), ("_id", DESCENDING)]).limit(limit)
    async for document in cursor:
        for row in readable([document], export.row, export.kind):
            yield row
