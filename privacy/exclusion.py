"""Per-site excluded URL patterns: pages whose session replay, or whole tracking, must not happen.

The same patterns name funnel steps, heatmap page groups, personal pages and the pages a survey
targets. Pattern syntax:

* ``*`` matches any run of characters, including none and including ``/``; runs of ``*`` act as
  one. Every other character is literal: there are no regular expressions, no ``?`` wildcard and
  no escapes.
* A pattern matches the whole subject (it is anchored at both ends); to match a prefix write
  ``/checkout*``.
* A pattern starting with ``/`` is matched against the URL's path, plus ``?`` and the query
  when the pattern itself contains ``?`` and the URL has a query. An empty path counts as ``/``.
* Any other pattern is matched against the full URL without its fragment,
  ``scheme://host[:port]/path[?query]``.
* Letters that land on the scheme or host (everything before the path) compare
  case-insensitively (ASCII only); letters that land on the path or query compare exactly.
* Browsers percent-encode URLs (``/käse`` is reported as ``/k%C3%A4se``), so a URL containing
  ``%`` is tried both as given and percent-decoded; either spelling in a pattern works.
* A URL without a scheme and host (or one urlsplit rejects) cannot be split reliably, so every
  pattern is then tried against the raw text as given, and path patterns also against a
  best-effort path (+ query).
* When a URL is tried in several forms the rule applies if any form matches: doubt errs towards
  excluding.

A pattern saved (validate_pattern) has 1 to 500 characters and at most 16 ``*`` once runs of
``*`` are collapsed, with no whitespace, no control characters and no ``#``; surrounding
whitespace is trimmed. A pattern stored before the star limit still matches.

Matching costs one pass over the URL per piece, never more: see `PagePattern`. A pattern is
split into its pieces once (`PagePattern`, kept by `ExclusionRule`), and a URL into the texts
patterns are matched against once (`PageUrl`), however many patterns it meets; `page_matcher`
also remembers each (URL, pattern) answer for the length of one report.
"""

from __future__ import annotations

import functools
import re
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal
from urllib.parse import SplitResult, unquote, urlsplit

from errors import InvalidInput

ExclusionScope = Literal["replay", "all"]
Exclusion = Literal["none", "replay", "all"]

MAX_PATTERN_CHARS = 500
#: Stars in a saved pattern. Each star is one more search of the URL for every match, and a
#: report matches every page of its range against every step; no shop's page pattern needs
#: more than a handful (`/product/*/reviews*` has two).
MAX_PATTERN_STARS = 16
WILDCARD = "*"
#: Distinct (URL, pattern) answers one `page_matcher` keeps: a report's pages repeat (a shop has
#: far fewer pages than pageviews), and beyond this the oldest are worked out again.
MAX_REMEMBERED_MATCHES = 65_536
#: Compiled patterns kept for the process, like `re`'s own cache of compiled expressions: every
#: pageview meets its site's excluded URLs (up to 200), and compiling them each time cost more
#: than matching them.
MAX_COMPILED_PATTERNS = 4_096
#: Split URLs one `page_matcher` keeps (each holds a few copies of its URL): a report tries a
#: session's pages against one step after another, so a session's worth is what is reused.
MAX_REMEMBERED_URLS = 1_024

_WILDCARD_RUN = re.compile(r"\*{2,}")
# `\s` is str.isspace() and \x00-\x1f, \x7f-\x9f is Unicode's category Cc, code point for code
# point; one search in C instead of a Python loop over up to 500 characters.
_SPACE_OR_CONTROL = re.compile(r"[\s\x00-\x1f\x7f-\x9f]")
_ASCII_LOWERCASE = MappingProxyType(str.maketrans(string.ascii_uppercase, string.ascii_lowercase))


def _fold(text: str) -> str:
    return text.translate(_ASCII_LOWERCASE)


def _normalised(pattern: object) -> str:
    """The pattern trimmed with its runs of `*` collapsed, or ValueError saying what is wrong
    with its syntax (any number of stars)."""
    if not isinstance(pattern, str):
        raise ValueError("The pattern must be text.")
    normalised = _WILDCARD_RUN.sub(WILDCARD, pattern.strip())
    if not normalised:
        raise ValueError("The pattern is empty.")
    if len(normalised) > MAX_PATTERN_CHARS:
        raise ValueError(f"The pattern is longer than {MAX_PATTERN_CHARS} characters.")
    offending = _SPACE_OR_CONTROL.search(normalised)
    if offending is not None:
        if offending.group().isspace():
            raise ValueError("The pattern must not contain spaces or other whitespace.")
        raise ValueError("The pattern must not contain control characters.")
    if "#" in normalised:
        raise ValueError("The pattern must not contain '#': URL fragments are never matched.")
    return normalised


def validate_pattern(pattern: str) -> str:
    """Return the normalised pattern, or raise ValueError with a message fit to show a user."""
    normalised = _normalised(pattern)
    stars = normalised.count(WILDCARD)
    if stars > MAX_PATTERN_STARS:
        raise ValueError(f"The pattern has {stars} '*'; at most {MAX_PATTERN_STARS} are "
                         "allowed.")
    return normalised


@dataclass(frozen=True, slots=True)
class _Subject:
    """Text a pattern is matched against; its first fold_end characters compare case-blind,
    so `folded` has them in lower case and every comparison is made against it."""

    text: str
    fold_end: int
    folded: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        folded = _fold(self.text[: self.fold_end]) + self.text[self.fold_end:]
        object.__setattr__(self, "folded", folded)


def _path_and_query(parts: SplitResult, include_query: bool) -> str:
    path = parts.path or "/"
    if include_query and parts.query:
        return f"{path}?{parts.query}"
    return path


def _raw_path_and_query(url: str, include_query: bool) -> str:
    """Best-effort path (+ query) of text that urlsplit could not take apart."""
    text = url.split("#", 1)[0]
    scheme_end = text.find("://")
    if text.startswith("//") or scheme_end != -1:
        authority_start = 2 if text.startswith("//") else scheme_end + 3
        path_start = text.find("/", authority_start)
        text = text[path_start:] if path_start != -1 else "/"
    return text if include_query else text.split("?", 1)[0]


def _split(url: str) -> SplitResult | None:
    try:
        return urlsplit(url)
    except ValueError:
        return None


def _with_decoded_forms(subjects: list[_Subject]) -> tuple[_Subject, ...]:
    decoded_forms = [
        _Subject(unquote(subject.text), fold_end=len(unquote(subject.text[: subject.fold_end])))
        for subject in subjects
        if "%" in subject.text
    ]
    return (*subjects, *decoded_forms)


class PageUrl:
    """A URL and the texts patterns are matched against, each worked out once: the URL is split
    once however many patterns meet it."""

    __slots__ = ("url", "_parts", "_subjects")

    def __init__(self, url: str) -> None:
        self.url = url
        self._parts = _split(url)
        self._subjects: dict[tuple[bool, bool], tuple[_Subject, ...]] = {}

    def subjects(self, is_path: bool, with_query: bool) -> tuple[_Subject, ...]:
        """The forms a path pattern (with a `?` or not) or a full-URL pattern is tried on."""
        key = (is_path, with_query and is_path)
        known = self._subjects.get(key)
        if known is None:
            known = self._subjects[key] = _with_decoded_forms(self._undecoded(*key))
        return known

    def _undecoded(self, is_path: bool, with_query: bool) -> list[_Subject]:
        parts = self._parts
        if parts is not None and parts.scheme and parts.netloc:
            if is_path:
                return [_Subject(_path_and_query(parts, with_query), fold_end=0)]
            authority = f"{parts.scheme}://{parts.netloc}"
            full_url = authority + _path_and_query(parts, include_query=True)
            return [_Subject(full_url, fold_end=len(authority))]
        subjects = [_Subject(self.url, fold_end=0)]
        if is_path:
            subjects.append(_Subject(_raw_path_and_query(self.url, with_query), fold_end=0))
        return subjects


def _piece_at(subject: _Subject, piece: str, folded_piece: str, position: int) -> bool:
    """Whether the piece is in the subject at `position`, case-blind where it lands before
    fold_end."""
    fold_chars = subject.fold_end - position
    if fold_chars <= 0:
        return subject.folded.startswith(piece, position)
    if fold_chars >= len(piece):
        return subject.folded.startswith(folded_piece, position)
    return (subject.folded.startswith(folded_piece[:fold_chars], position)
            and subject.folded.startswith(piece[fold_chars:], subject.fold_end))


def _find_piece(subject: _Subject, piece: str, folded_piece: str, start: int, stop: int) -> int:
    """Leftmost position p in [start, stop - len(piece)] where the piece matches, or -1."""
    text, fold_end = subject.folded, subject.fold_end
    # A piece with no capital ASCII letter is its own folded form (PagePattern keeps the same
    # object): it compares alike on both sides of fold_end.
    if start >= fold_end or folded_piece is piece:
        return text.find(piece, start, stop)
    # Positions fall into three bands: piece wholly in the folded part, straddling its end, and
    # wholly after it. Searching the bands in order keeps the leftmost match and uses str.find;
    # the straddling band has fewer positions than the piece has characters, and is searched
    # at most once per match, since the piece found there or after it ends past fold_end.
    found = text.find(folded_piece, start, min(stop, fold_end))
    if found != -1:
        return found
    length = len(piece)
    for position in range(max(start, fold_end - length + 1), min(fold_end, stop - length + 1)):
        if _piece_at(subject, piece, folded_piece, position):
            return position
    return text.find(piece, fold_end, stop)


@dataclass(frozen=True, slots=True)
class PagePattern:
    """A pattern split once into the literal pieces between its stars.

    Matching places the pieces greedily from left to right, each at its leftmost occurrence
    after the one before, and never moves one back. That is exact for this syntax: if the
    pieces fit at all, the leftmost place of each leaves the most room for the rest, since a
    star takes whatever lies between. So a match is one left-to-right pass: the first and last
    pieces are compared in place, and each middle piece is searched for once (str.find) in the
    text after the previous piece, which the search for the next one never reads again. The
    work is at most one search per star over disjoint stretches of the URL, plus, for a
    full-URL pattern, at most len(piece) places tried where one piece straddles the end of the
    host: time linear in the URL's length for a pattern of bounded size (CPython's find takes
    at most len(piece) comparisons per character of a short text and is linear for long ones),
    with no backtracking, so no pattern can make it explode as a regular expression can.
    """

    text: str
    pieces: tuple[str, ...]
    #: Each piece ASCII-lowercased; the piece itself, the same object, when that changes nothing.
    folded: tuple[str, ...]

    @classmethod
    def of(cls, pattern: str) -> PagePattern:
        """The pattern compiled; ValueError when its syntax is not valid (stars not limited,
        so that a pattern stored before the limit still matches)."""
        text = _normalised(pattern)
        pieces = tuple(text.split(WILDCARD))
        folded = tuple(piece if _fold(piece) == piece else _fold(piece) for piece in pieces)
        return cls(text, pieces, folded)

    def matches(self, url: str | PageUrl) -> bool:
        """True when the pattern matches the URL in any of the forms it is tried in."""
        page = url if isinstance(url, PageUrl) else PageUrl(url)
        is_path = self.text.startswith("/")
        return any(self._matches(subject)
                   for subject in page.subjects(is_path, "?" in self.text))

    def _matches(self, subject: _Subject) -> bool:
        pieces, folded = self.pieces, self.folded
        end = len(subject.text)
        if len(pieces) == 1:
            return len(pieces[0]) == end and _piece_at(subject, pieces[0], folded[0], 0)
        first, last = pieces[0], pieces[-1]
        if len(first) + len(last) > end:
            return False
        if not _piece_at(subject, first, folded[0], 0):
            return False
        if not _piece_at(subject, last, folded[-1], end - len(last)):
            return False
        position = len(first)
        stop = end - len(last)
        for index in range(1, len(pieces) - 1):
            found = _find_piece(subject, pieces[index], folded[index], position, stop)
            if found == -1:
                return False
            position = found + len(pieces[index])
        return True


@functools.lru_cache(maxsize=MAX_COMPILED_PATTERNS)
def compiled_pattern(pattern: str) -> PagePattern:
    """`PagePattern.of(pattern)`, compiled once for the process: the answer never changes."""
    return PagePattern.of(pattern)


@dataclass(frozen=True, slots=True)
class ExclusionRule:
    """One excluded URL pattern and what it excludes; the pattern is normalised and compiled."""

    pattern: str
    scope: ExclusionScope = "replay"
    compiled: PagePattern = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.scope not in ("replay", "all"):
            raise ValueError(f"Unknown exclusion scope {self.scope!r}.")
        compiled = compiled_pattern(self.pattern)
        # Frozen dataclasses only allow this route for storing the derived values.
        object.__setattr__(self, "pattern", compiled.text)
        object.__setattr__(self, "compiled", compiled)


def site_exclusion_rules(site: dict[str, Any]) -> list[ExclusionRule]:
    """The site's excluded-URL rules."""
    return [
        ExclusionRule(rule["pattern"], rule.get("scope", "replay"))
        for rule in site.get("settings", {}).get("excludedUrls", [])
    ]


def checked_settings(changes: dict[str, Any]) -> dict[str, Any]:
    """Site setting changes with their excluded-URL patterns normalised; InvalidInput names
    the first bad one."""
    if "excludedUrls" not in changes:
        return changes
    rules = []
    for index, rule in enumerate(changes["excludedUrls"]):
        try:
            pattern = validate_pattern(rule["pattern"])
        except ValueError as exc:
            raise InvalidInput(str(exc), field=f"settings.excludedUrls.{index}.pattern") from None
        rules.append({"pattern": pattern, "scope": rule.get("scope", "replay")})
    return {**changes, "excludedUrls": rules}


def checked_pattern_list(changes: dict[str, Any], key: str, limit: int,
                         what: str) -> dict[str, Any]:
    """Site setting changes with the list of patterns under `key` normalised; InvalidInput
    names the first bad one, or the list when it holds more than `limit` (`what` they are)."""
    if key not in changes:
        return changes
    patterns = changes[key]
    if len(patterns) > limit:
        raise InvalidInput(f"At most {limit} {what}.", field=f"settings.{key}")
    checked = []
    for index, pattern in enumerate(patterns):
        try:
            checked.append(validate_pattern(pattern))
        except ValueError as exc:
            raise InvalidInput(str(exc), field=f"settings.{key}.{index}") from None
    return {**changes, key: checked}


def rule_matches(url: str | PageUrl, rule: ExclusionRule) -> bool:
    """True when the rule's pattern matches the URL under the module's pattern syntax."""
    return rule.compiled.matches(url)


def exclusion_for(url: str, rules: Sequence[ExclusionRule]) -> Exclusion:
    """Return the widest scope among the rules matching url: "all", "replay" or "none"."""
    page = PageUrl(url)
    widest: Exclusion = "none"
    for rule in rules:
        if rule.compiled.matches(page):
            if rule.scope == "all":
                return "all"
            widest = "replay"
    return widest


def page_matcher() -> Callable[[str, str], bool]:
    """(url, pattern) -> whether it matches, for one report: each pattern compiled once, each
    URL split once, and each answer remembered (the last MAX_REMEMBERED_MATCHES)."""

    @functools.lru_cache(maxsize=MAX_REMEMBERED_URLS)
    def page(url: str) -> PageUrl:
        return PageUrl(url)

    @functools.lru_cache(maxsize=MAX_REMEMBERED_MATCHES)
    def matches(url: str, pattern: str) -> bool:
        return compiled_pattern(pattern).matches(page(url))

    return matches
