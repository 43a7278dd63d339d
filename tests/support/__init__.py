"""Helpers shared by the test suite, such as builders of small fixture files."""
