"""Fixtures for the commerce tests: the dashboard API's ingest helper and viewer."""

from tests.dashboard_api.conftest import viewer_token

__all__ = ["viewer_token"]
