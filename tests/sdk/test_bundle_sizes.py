"""The loader stays small on every page; the survey widget is a file of its own (issue 20)."""

from __future__ import annotations

import gzip

import pytest

from handlers.sdk import SDK_DIST

#: The loader's budget, gzipped: it is on every page of every shop.
LOADER_GZIP_BUDGET = 5 * 1024


def _built(name: str) -> bytes:
    path = SDK_DIST / name
    if not path.is_file():
        pytest.fail(f"{path} is missing: run `make sdk`")
    return path.read_bytes()


def test_the_loader_stays_under_five_kib_gzipped_without_the_survey_widget():
    loader = _built("loader.js")
    widget = _built("survey.js")
    assert len(gzip.compress(loader, 9)) < LOADER_GZIP_BUDGET
    # The widget's dialog and stylesheet live only in survey.js, loaded where a survey may show.
    for marker in (b"adoptedStyleSheets", b"aria-modal"):
        assert marker not in loader and marker in widget
