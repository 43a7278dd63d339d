"""Tests for per-site excluded URL patterns."""

import functools

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from privacy.exclusion import (
    MAX_PATTERN_STARS,
    ExclusionRule,
    exclusion_for,
    page_matcher,
    rule_matches,
    validate_pattern,
)

SHOP = "https://shop.example"

path_characters = st.characters(
    exclude_categories=("Cc", "Cs", "Zs", "Zl", "Zp"), exclude_characters="*#?"
)
paths = st.text(alphabet=path_characters, max_size=60).map(lambda text: "/" + text)


def _reference_match(pattern: str, subject: str, fold_end: int) -> bool:
    """Character-by-character glob match, written independently of the module under test."""

    @functools.cache
    def matches_from(pattern_index: int, subject_index: int) -> bool:
        if pattern_index == len(pattern):
            return subject_index == len(subject)
        if pattern[pattern_index] == "*":
            return matches_from(pattern_index + 1, subject_index) or (
                subject_index < len(subject) and matches_from(pattern_index, subject_index + 1)
            )
        if subject_index == len(subject):
            return False
        wanted, seen = pattern[pattern_index], subject[subject_index]
        if subject_index < fold_end:
            wanted, seen = wanted.lower(), seen.lower()
        return wanted == seen and matches_from(pattern_index + 1, subject_index + 1)

    return matches_from(0, 0)


def _excluded(url: str, *patterns: str) -> str:
    return exclusion_for(url, [ExclusionRule(pattern) for pattern in patterns])


def test_a_path_pattern_matches_the_whole_path_and_nothing_longer() -> None:
    assert _excluded(f"{SHOP}/checkout", "/checkout") == "replay"
    assert _excluded(f"{SHOP}/checkout/step-2", "/checkout") == "none"
    assert _excluded(f"{SHOP}/my/checkout", "/checkout") == "none"


def test_a_trailing_star_turns_a_pattern_into_a_prefix() -> None:
    assert _excluded(f"{SHOP}/checkout/step-2", "/checkout*") == "replay"
    assert _excluded(f"{SHOP}/checkouts", "/checkout*") == "replay"
    assert _excluded(f"{SHOP}/cart", "/checkout*") == "none"


def test_a_star_spans_several_path_segments() -> None:
    assert _excluded(f"{SHOP}/account/42/7/orders", "/account/*/orders") == "replay"
    assert _excluded(f"{SHOP}/account/orders", "/account/*/orders") == "none"


def test_other_characters_are_literal_not_regular_expressions() -> None:
    assert _excluded(f"{SHOP}/checkout", "/check.ut") == "none"
    assert _excluded(f"{SHOP}/check.ut", "/check.ut") == "replay"
    assert _excluded(f"{SHOP}/a+b", "/a+b") == "replay"
    assert _excluded(f"{SHOP}/aab", "/a+b") == "none"


def test_a_path_pattern_ignores_the_query_unless_it_contains_a_question_mark() -> None:
    assert _excluded(f"{SHOP}/search?q=shoes", "/search") == "replay"
    assert _excluded(f"{SHOP}/search?q=shoes", "/search?q=*") == "replay"
    assert _excluded(f"{SHOP}/search?page=2", "/search?q=*") == "none"
    assert _excluded(f"{SHOP}/search", "/search?q=*") == "none"


def test_an_empty_path_counts_as_the_root() -> None:
    assert _excluded(SHOP, "/") == "replay"


def test_the_path_is_case_sensitive() -> None:
    assert _excluded(f"{SHOP}/checkout", "/Checkout") == "none"
    assert _excluded(f"{SHOP}/Checkout", "/Checkout") == "replay"


def test_a_full_url_pattern_matches_scheme_and_host_case_insensitively() -> None:
    assert _excluded("HTTPS://Shop.EXAMPLE/checkout", "https://shop.example/checkout") == "replay"
    assert _excluded("https://shop.example/checkout", "https://SHOP.example/checkout") == "replay"
    assert _excluded("https://shop.example/checkout", "https://shop.example/Checkout") == "none"


def test_case_blindness_ends_where_the_path_starts_even_under_a_star() -> None:
    assert _excluded(f"{SHOP}/Checkout/pay", "*SHOP.example/Checkout*") == "replay"
    assert _excluded(f"{SHOP}/checkout/pay", "*SHOP.example/Checkout*") == "none"


def test_a_full_url_pattern_covers_the_query_and_ignores_the_fragment() -> None:
    assert _excluded(f"{SHOP}/checkout#top", f"{SHOP}/checkout") == "replay"
    assert _excluded(f"{SHOP}/search?q=socks", f"{SHOP}/search?q=*") == "replay"
    assert _excluded(f"{SHOP}/search?q=socks", f"{SHOP}/search") == "none"


def test_a_full_url_pattern_can_cover_every_subdomain() -> None:
    every_subdomain = "https://*.shop.example/account*"
    assert _excluded("https://eu.shop.example/account", every_subdomain) == "replay"
    assert _excluded("https://shop.example.evil/account", every_subdomain) == "none"


def test_a_percent_encoded_url_matches_a_pattern_written_in_plain_characters() -> None:
    assert _excluded(f"{SHOP}/k%C3%A4se/emmentaler", "/käse*") == "replay"
    assert _excluded(f"{SHOP}/k%C3%A4se/emmentaler", "/k%C3%A4se*") == "replay"
    assert _excluded(f"{SHOP}/k%C3%A4se/emmentaler", f"{SHOP}/käse/*") == "replay"
    assert _excluded(f"{SHOP}/k%C3%A4se/emmentaler", "/kase*") == "none"


def test_the_widest_scope_among_matching_rules_wins() -> None:
    rules = [
        ExclusionRule("/checkout*", scope="replay"),
        ExclusionRule("/checkout/pay*", scope="all"),
        ExclusionRule("/checkout/*", scope="replay"),
    ]
    assert exclusion_for(f"{SHOP}/checkout/pay/card", rules) == "all"
    assert exclusion_for(f"{SHOP}/checkout/cart", rules) == "replay"
    assert exclusion_for(f"{SHOP}/products", rules) == "none"


def test_no_rules_exclude_nothing() -> None:
    assert exclusion_for(f"{SHOP}/checkout", []) == "none"


def test_a_rule_excludes_only_replay_unless_told_otherwise() -> None:
    assert ExclusionRule("/checkout").scope == "replay"


@pytest.mark.parametrize(
    ("url", "pattern"),
    [
        ("/checkout/step-1", "/checkout*"),
        ("checkout page", "*checkout*"),
        ("https://[::1/checkout", "*checkout*"),
        ("https://[::1/checkout", "/checkout*"),
        ("//shop.example/checkout", "*/checkout"),
        ("//shop.example/checkout", "/checkout"),
        ("/checkout?step=2#pay", "/checkout"),
        ("https://[::1/checkout?step=2", "/checkout"),
    ],
)
def test_a_url_without_scheme_and_host_is_matched_by_its_raw_text(url: str, pattern: str) -> None:
    assert _excluded(url, pattern) == "replay"


def test_an_unparseable_url_is_not_excluded_by_an_unrelated_pattern() -> None:
    assert _excluded("https://[::1/products", "*checkout*") == "none"


def test_validate_pattern_trims_and_collapses_stars() -> None:
    assert validate_pattern("  /checkout**  ") == "/checkout*"
    assert ExclusionRule(" /a***b ").pattern == "/a*b"


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("/" + "a" * 500, "longer than 500"),
        ("/check out", "whitespace"),
        ("/check\tout", "whitespace"),
        ("/check\u00a0out", "whitespace"),
        ("/check\x00out", "control"),
        ("/check\x7fout", "control"),
        ("/checkout#pay", "#"),
        ("/" + "a*" * 17, "17 '\\*'; at most 16"),
    ],
)
def test_validate_pattern_explains_what_is_wrong(pattern: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        validate_pattern(pattern)


def test_a_pattern_of_exactly_500_characters_is_allowed() -> None:
    assert validate_pattern("/" + "a" * 499) == "/" + "a" * 499


def test_a_pattern_may_have_sixteen_stars_counted_after_runs_collapse() -> None:
    assert validate_pattern("/" + "a*" * MAX_PATTERN_STARS).count("*") == MAX_PATTERN_STARS
    assert validate_pattern("/" + "a**" * MAX_PATTERN_STARS) == "/" + "a*" * MAX_PATTERN_STARS


def test_a_pattern_stored_before_the_star_limit_still_matches() -> None:
    stored = "/" + "a*" * 100
    assert _excluded(f"{SHOP}/{'a' * 100}", stored) == "replay"
    assert _excluded(f"{SHOP}/{'a' * 99}", stored) == "none"


def test_a_rule_refuses_an_invalid_pattern_or_scope() -> None:
    with pytest.raises(ValueError):
        ExclusionRule("/check out")
    with pytest.raises(ValueError, match="scope"):
        ExclusionRule("/checkout", scope="everything")  # type: ignore[arg-type]


def test_a_pathological_pattern_finishes_and_does_not_match() -> None:
    many_as = "a" * 5000
    assert _excluded(f"{SHOP}/{many_as}", "/*a*a*a*a*a*a*a*a*b") == "none"
    assert _excluded(f"{SHOP}/{many_as}", "*a*a*a*a*a*a*a*a*b") == "none"
    assert _excluded(f"{SHOP}/{many_as}b", "/*a*a*a*a*a*a*a*a*b") == "replay"


@given(paths)
def test_a_pattern_equal_to_the_path_always_matches(path: str) -> None:
    assert _excluded(f"{SHOP}{path}", path) == "replay"


@given(paths, st.text(alphabet=path_characters, max_size=30))
def test_a_pattern_equal_to_path_and_query_matches_that_url(path: str, query: str) -> None:
    assume(query)
    assert _excluded(f"{SHOP}{path}?{query}", f"{path}?{query}") == "replay"


@given(st.text())
def test_a_lone_star_matches_every_url(url: str) -> None:
    assert exclusion_for(url, [ExclusionRule("*", scope="all")]) == "all"


@given(st.text(alphabet="ab/", max_size=12), st.text(alphabet="ab/*", max_size=8))
def test_path_matching_agrees_with_a_reference_matcher(path_tail: str, pattern_tail: str) -> None:
    path, pattern = "/" + path_tail, "/" + pattern_tail
    expected = _reference_match(pattern, path, fold_end=0)
    assert rule_matches(f"{SHOP}{path}", ExclusionRule(pattern)) == expected


@given(st.data())
def test_full_url_matching_agrees_with_a_reference_matcher(data: st.DataObject) -> None:
    host = data.draw(st.text(alphabet="aAbB.", min_size=1, max_size=6), label="host")
    path = "/" + data.draw(st.text(alphabet="aAbB/", max_size=8), label="path")
    authority = f"https://{host}"
    # Patterns are derived from the URL itself so that matches are as likely as misses.
    pattern = "".join(
        data.draw(st.sampled_from([character, character.swapcase(), "*", "", "a*"]))
        for character in authority + path
    )
    assume(pattern.strip("*") and not pattern.startswith("/"))
    expected = _reference_match(pattern, authority + path, fold_end=len(authority))
    assert rule_matches(authority + path, ExclusionRule(pattern)) == expected


@given(st.lists(st.tuples(st.sampled_from(["https://shop.example", "https://SHOP.example", ""]),
                          st.text(alphabet="aA/%4?=", max_size=10)), min_size=1, max_size=6),
       st.lists(st.text(alphabet="aA/*%4?.:", min_size=1, max_size=8), min_size=1, max_size=4))
def test_a_reports_matcher_answers_as_the_rules_do_however_often_it_is_asked(
        urls: list[tuple[str, str]], patterns: list[str]) -> None:
    matches = page_matcher()
    for _ in range(2):
        for origin, tail in urls:
            for pattern in patterns:
                url = f"{origin}/{tail}"
                assert matches(url, pattern) == rule_matches(url, ExclusionRule(pattern))
