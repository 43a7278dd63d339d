"""Spreadsheet formula injection: neutralise CSV cells a spreadsheet would run as formulas.

Excel, LibreOffice and Google Sheets treat a cell starting with `=`, `+`, `-` or `@` as a
formula, and some strip a leading tab or carriage return before deciding (OWASP "CSV
Injection"). Visitors write lead fields and error messages, so every exported cell passes here.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from instants import format_instant

#: First characters that make a spreadsheet evaluate the cell.
DANGEROUS_FIRST_CHARACTERS = frozenset("=+-@\t\r")


def neutralise_cell(value: Any) -> str:
    """The cell as text (an instant in the one spelling of instants.py), prefixed with a single
    quote when it would start a formula."""
    text = ("" if value is None else format_instant(value) if isinstance(value, datetime)
            else str(value))
    if text and text[0] in DANGEROUS_FIRST_CHARACTERS:
        # The quote makes spreadsheets show the text as typed; it is the documented escape.
        return "'" + text
    return text


def neutralise_row(values: list[Any]) -> list[str]:
    """Every cell of a row, neutralised."""
    return [neutralise_cell(value) for value in values]
