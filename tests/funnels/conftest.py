"""Fixtures for funnels, revenue at risk and traffic sources: those of the dashboard data API."""

from tests.dashboard_api.conftest import viewer_token

__all__ = ["viewer_token"]
