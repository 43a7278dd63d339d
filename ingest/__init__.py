"""Ingest orchestration: privacy gate, anonymisation, then the writes, for each item kind."""
