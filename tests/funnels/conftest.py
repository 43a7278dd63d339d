"""Fixtures for funnels, revenue at risk and traffic sources: those of the dashboard data API."""

from tests.dashboard_api.conftest import ingest, viewer_token

__all__ = ["ingest", "viewer_token"]
