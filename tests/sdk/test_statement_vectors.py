"""The published statement vectors attribute pageviews through the service's own path."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from config.metrics import Metrics
from ingest.statements import StatementAttributor

VECTORS = json.loads((Path(__file__).resolve().parent.parent / "privacy"
                      / "statement_vectors.json").read_text(encoding="utf-8"))


class VectorKeyring:
    """A keyring whose site signs with the vector's derived key, as a real site's would."""

    def __init__(self, key_hex: str) -> None:
        self.key = bytes.fromhex(key_hex)

    def statement_keys(self, site: dict[str, Any], now: datetime) -> list[bytes]:
        """The vector's key only."""
        return [self.key]


@pytest.mark.parametrize("vector", VECTORS, ids=lambda vector: vector["product_id"])
async def test_each_published_vector_attributes_its_product_once(
        store, vector: dict[str, Any]) -> None:
    metrics = Metrics()
    attributor = StatementAttributor(store, VectorKeyring(vector["derived_key_hex"]), metrics,
                                     max_age_seconds=600)
    site = {"_id": "site-1"}
    signed_at = datetime.fromtimestamp(vector["issued_at"] + 5, UTC)
    first = await attributor.attribute(site, vector["token"], vector["page_url"], now=signed_at)
    assert first == {"productId": vector["product_id"], "via": "statement"}
    again = await attributor.attribute(site, vector["token"], vector["page_url"], now=signed_at)
    assert again is None
    late = datetime.fromtimestamp(vector["issued_at"] + 601, UTC)
    assert await attributor.attribute({"_id": "site-2"}, vector["token"], vector["page_url"],
                                      now=late) is None
    assert metrics.value("product_statements_total", outcome="rejected", reason="replayed") == 1
    assert metrics.value("product_statements_total", outcome="rejected", reason="expired") == 1
