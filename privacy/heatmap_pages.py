"""Which heatmap page a URL belongs to: its path without query or fragment, or a grouping rule.

A site's grouping rules (setting `heatmapPageGroups`) are written like excluded-URL patterns
(privacy/exclusion.py); the first that matches names the page, so `/product/*` gathers every
product page into one heatmap.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from privacy.exclusion import ExclusionRule, PageUrl, checked_pattern_list, rule_matches

#: Grouping rules per site: enough for a shop's page types, few enough to try on every event.
MAX_PAGE_GROUPS = 50


def page_group_rules(site: dict[str, Any]) -> list[ExclusionRule]:
    """The site's grouping rules, in the order the owner wrote them."""
    return [ExclusionRule(pattern) for pattern in
            site.get("settings", {}).get("heatmapPageGroups", [])]


def page_of(url: str, rules: list[ExclusionRule]) -> str:
    """The heatmap page of a URL: the first matching rule's pattern, else its path."""
    page = PageUrl(url)
    for rule in rules:
        if rule_matches(page, rule):
            return rule.pattern
    try:
        path = urlsplit(url).path
    except ValueError:
        path = url.split("#", 1)[0].split("?", 1)[0]
    return path or "/"


def checked_page_groups(settings: dict[str, Any]) -> dict[str, Any]:
    """Setting changes with their grouping rules normalised; InvalidInput names a bad one."""
    return checked_pattern_list(settings, "heatmapPageGroups", MAX_PAGE_GROUPS,
                                "grouping rules")
