"""Per-site excluded URL patterns: pages whose session replay, or whole tracking, must not happen.

Pattern syntax:

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

Valid patterns (see validate_pattern) are 1 to 500 characters with no whitespace, no control
characters and no ``#``; surrounding whitespace is trimmed and runs of ``*`` are collapsed.

Matching splits the pattern on ``*`` and places the literal pieces greedily from left to right,
which is exact for this syntax and needs at most one scan of the URL per piece: user patterns
never become regular expressions, so they cannot trigger catastrophic backtracking.
"""

import re
import string
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal
from urllib.parse import SplitResult, unquote, urlsplit

from errors import InvalidInput

ExclusionScope = Literal["replay", "all"]
Exclusion = Literal["none", "replay", "all"]

MAX_PATTERN_CHARS = 500
WILDCARD = "*"

_WILDCARD_RUN = re.compile(r"\*{2,}")
_ASCII_LOWERCASE = MappingProxyType(str.maketrans(string.ascii_uppercase, string.ascii_lowercase))


def validate_pattern(pattern: str) -> str:
    """Return the normalised pattern, or raise ValueError with a message fit to show a user."""
    if not isinstance(pattern, str):
        raise ValueError("The pattern must be text.")
    normalised = _WILDCARD_RUN.sub(WILDCARD, pattern.strip())
    if not normalised:
        raise ValueError("The pattern is empty.")
    if len(normalised) > MAX_PATTERN_CHARS:
        raise ValueError(f"The pattern is longer than {MAX_PATTERN_CHARS} characters.")
    for character in normalised:
        if character.isspace():
            raise ValueError("The pattern must not contain spaces or other whitespace.")
        if unicodedata.category(character) == "Cc":
            raise ValueError("The pattern must not contain control characters.")
    if "#" in normalised:
        raise ValueError("The pattern must not contain '#': URL fragments are never matched.")
    return normalised


@dataclass(frozen=True, slots=True)
class ExclusionRule:
    """One excluded URL pattern and what it excludes; the pattern is validated and normalised."""

    pattern: str
    scope: ExclusionScope = "replay"

    def __post_init__(self) -> None:
        if self.scope not in ("replay", "all"):
            raise ValueError(f"Unknown exclusion scope {self.scope!r}.")
        # Frozen dataclasses only allow this route for storing the normalised value.
        object.__setattr__(self, "pattern", validate_pattern(self.pattern))


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


@dataclass(frozen=True, slots=True)
class _Subject:
    """Text a pattern is matched against; its first fold_end characters compare case-blind."""

    text: str
    fold_end: int


def _fold(text: str) -> str:
    return text.translate(_ASCII_LOWERCASE)


def _fold_prefix(text: str, fold_end: int) -> str:
    return _fold(text[:fold_end]) + text[fold_end:]


def _piece_at(subject: _Subject, folded_text: str, piece: str, position: int) -> bool:
    fold_chars = max(0, subject.fold_end - position)
    expected = _fold(piece[:fold_chars]) + piece[fold_chars:]
    return folded_text.startswith(expected, position)


def _find_piece(subject: _Subject, folded_text: str, piece: str, start: int, stop: int) -> int:
    """Leftmost position p in [start, stop - len(piece)] where piece matches, or -1."""
    length = len(piece)
    if length == 0:
        return start if start <= stop else -1
    fold_end = subject.fold_end
    # Positions fall into three bands: piece wholly in the folded part, straddling its end, and
    # wholly after it. Searching the bands in order keeps the leftmost match and uses str.find.
    wholly_folded = folded_text.find(_fold(piece), start, min(stop, fold_end))
    if wholly_folded != -1:
        return wholly_folded
    for position in range(max(start, fold_end - length + 1), min(fold_end, stop - length + 1)):
        if _piece_at(subject, folded_text, piece, position):
            return position
    return folded_text.find(piece, max(start, fold_end), stop)


def _glob_matches(pattern: str, subject: _Subject) -> bool:
    folded_text = _fold_prefix(subject.text, subject.fold_end)
    pieces = pattern.split(WILDCARD)
    if len(pieces) == 1:
        return len(pattern) == len(subject.text) and _piece_at(subject, folded_text, pattern, 0)
    first, *middle, last = pieces
    end = len(subject.text)
    if len(first) + len(last) > end:
        return False
    if not _piece_at(subject, folded_text, first, 0):
        return False
    if not _piece_at(subject, folded_text, last, end - len(last)):
        return False
    # Greedy leftmost placement is exact here: an earlier end for one piece never hurts the next.
    position = len(first)
    stop = end - len(last)
    for piece in middle:
        found = _find_piece(subject, folded_text, piece, position, stop)
        if found == -1:
            return False
        position = found + len(piece)
    return True


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


def _with_decoded_form(subjects: list[_Subject]) -> list[_Subject]:
    decoded_forms = [
        _Subject(unquote(subject.text), fold_end=len(unquote(subject.text[: subject.fold_end])))
        for subject in subjects
        if "%" in subject.text
    ]
    return subjects + decoded_forms


def _subjects(url: str, pattern: str) -> list[_Subject]:
    return _with_decoded_form(_undecoded_subjects(url, pattern))


def _undecoded_subjects(url: str, pattern: str) -> list[_Subject]:
    parts = _split(url)
    is_path_pattern = pattern.startswith("/")
    if parts is not None and parts.scheme and parts.netloc:
        if is_path_pattern:
            return [_Subject(_path_and_query(parts, "?" in pattern), fold_end=0)]
        authority = f"{parts.scheme}://{parts.netloc}"
        full_url = authority + _path_and_query(parts, include_query=True)
        return [_Subject(full_url, fold_end=len(authority))]
    subjects = [_Subject(url, fold_end=0)]
    if is_path_pattern:
        subjects.append(_Subject(_raw_path_and_query(url, "?" in pattern), fold_end=0))
    return subjects


def rule_matches(url: str, rule: ExclusionRule) -> bool:
    """True when the rule's pattern matches the URL under the module's pattern syntax."""
    return any(_glob_matches(rule.pattern, subject) for subject in _subjects(url, rule.pattern))


def exclusion_for(url: str, rules: Sequence[ExclusionRule]) -> Exclusion:
    """Return the widest scope among the rules matching url: "all", "replay" or "none"."""
    widest: Exclusion = "none"
    for rule in rules:
        if rule_matches(url, rule):
            if rule.scope == "all":
                return "all"
            widest = "replay"
    return widest
