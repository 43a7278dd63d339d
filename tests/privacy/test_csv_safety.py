"""Formula-injection neutralisation of exported CSV cells."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from privacy.csv_safety import DANGEROUS_FIRST_CHARACTERS, neutralise_cell, neutralise_row


@given(st.text())
def test_no_neutralised_cell_starts_with_a_formula_character(cell: str):
    assert neutralise_cell(cell)[:1] not in DANGEROUS_FIRST_CHARACTERS


@given(st.text())
def test_harmless_cells_are_unchanged_and_dangerous_ones_only_gain_a_quote(cell: str):
    neutralised = neutralise_cell(cell)
    if cell[:1] in DANGEROUS_FIRST_CHARACTERS:
        assert neutralised == "'" + cell
    else:
        assert neutralised == cell


def test_the_classic_payloads_are_neutralised():
    payloads = ["=HYPERLINK(\"https://evil.example\")", "+1+1", "-2+3", "@SUM(A1)",
                "\t=1", "\r=1"]
    assert [cell[0] for cell in neutralise_row(payloads)] == ["'"] * len(payloads)


def test_numbers_booleans_and_none_become_text():
    assert neutralise_row([3, True, None, -1.5]) == ["3", "True", "", "'-1.5"]
