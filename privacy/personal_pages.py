"""The customer's own pages (checkout, order received, My Account): recorded without their text.

The plugin puts the class `rr-mask` on `<body>` there and rrweb masks the text in the browser
(issue 33 point 6); this is the server's side, so that a modified page or loader cannot bring
the text back. The segment sweeper (ingest/segment_sweeper.py) hands every segment's rrweb
events to `mask_personal_text`, which masks, in place:

* every page the site's `personalPages` patterns match (excluded-URL syntax, privacy/exclusion.py;
  WooCommerce's own addresses by default), by the URL the segment was sent for or a URL its own
  meta events name: the whole page;
* every element carrying the class `rr-mask` in a full snapshot or an added node, and what is
  inside it, as rrweb itself does. On the plugin's pages that is `<body>`: the whole page again,
  and the segments after the full snapshot, which only name nodes by id, are masked whole when
  the caller says an earlier segment of the page was (`personal_before`).

Masking is rrweb's own: each character that is not whitespace becomes `*`, so the replay keeps
its layout. It covers text nodes (style sheets excepted: they are the page's look, not its
content), text changes, typed input and the attributes that carry words (`value`,
`placeholder`, `title`, `alt`, `aria-label`…), and the address of `mailto:` and `tel:` links.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from documents.sites import DEFAULT_SETTINGS
from privacy.exclusion import PageUrl, checked_pattern_list, compiled_pattern

#: Until the owner sets some: WooCommerce's checkout and My Account (documents/sites.py).
DEFAULT_PERSONAL_PAGES = tuple(DEFAULT_SETTINGS["personalPages"])
#: Patterns per site: a shop's own pages, few enough to try on every segment.
MAX_PERSONAL_PAGES = 50
#: rrweb's default `maskTextClass`, which the plugin puts on `<body>`.
MASK_CLASS = "rr-mask"
#: Attributes whose value is text a visitor reads (or typed).
TEXT_ATTRIBUTES = frozenset({
    "value", "placeholder", "title", "alt", "label", "aria-label", "aria-description",
    "aria-valuetext", "aria-placeholder", "aria-roledescription", "data-title",
})
#: Link schemes whose address is a person's (e-mail, phone).
PERSONAL_LINK = re.compile(r"^\s*(mailto|tel|sms):", re.I)

# rrweb's numbers: event types, incremental sources and serialised node types.
_FULL_SNAPSHOT, _INCREMENTAL, _META = 2, 3, 4
_MUTATION, _INPUT = 0, 5
_ELEMENT, _TEXT, _CDATA, _COMMENT = 2, 3, 4, 5
#: Elements whose `rr-mask` class covers the whole page.
_PAGE_ELEMENTS = frozenset({"html", "body"})
_NON_SPACE = re.compile(r"\S")


def personal_page_patterns(site: dict[str, Any]) -> list[str]:
    """The site's patterns of personal pages; WooCommerce's defaults until the owner sets some."""
    patterns = site.get("settings", {}).get("personalPages")
    return list(DEFAULT_PERSONAL_PAGES if patterns is None else patterns)


def checked_personal_pages(settings: dict[str, Any]) -> dict[str, Any]:
    """Setting changes with their personal-page patterns normalised; InvalidInput names a bad
    one."""
    return checked_pattern_list(settings, "personalPages", MAX_PERSONAL_PAGES,
                                "personal-page patterns")


def mask(text: str) -> str:
    """The text with every character but whitespace replaced by `*`, as rrweb masks."""
    return _NON_SPACE.sub("*", text)


class _Masker:
    """Masks one segment's events; remembers which nodes lie inside a masked element."""

    def __init__(self, whole_page: bool) -> None:
        self.whole_page = whole_page
        self.masked_ids: set[Any] = set()
        self.style_text_ids: set[Any] = set()
        self.count = 0
        self.full_snapshot = False

    def _masked(self, text: Any) -> Any:
        if not isinstance(text, str) or not _NON_SPACE.search(text):
            return text
        self.count += 1
        return mask(text)

    def _attribute(self, name: str, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        if name.lower() in TEXT_ATTRIBUTES:
            return self._masked(value)
        if name.lower() == "href" and PERSONAL_LINK.match(value):
            scheme, _, address = value.partition(":")
            return f"{scheme}:{self._masked(address)}"
        return value

    def node(self, node: Any, inside: bool, parent_tag: str = "") -> None:
        """Mask a serialised node and its children when inside a masked element."""
        if not isinstance(node, dict):
            return
        kind = node.get("type")
        if kind == _ELEMENT:
            classes = str((node.get("attributes") or {}).get("class") or "").split()
            if MASK_CLASS in classes and str(node.get("tagName") or "").lower() in _PAGE_ELEMENTS:
                self.whole_page = True
            inside = inside or MASK_CLASS in classes
            if inside:
                self.masked_ids.add(node.get("id"))
                attributes = node.get("attributes")
                if isinstance(attributes, dict):
                    for name, value in attributes.items():
                        attributes[name] = self._attribute(name, value)
            parent_tag = str(node.get("tagName") or "").lower()
        elif kind in (_TEXT, _CDATA, _COMMENT):
            if node.get("isStyle") or parent_tag == "style":
                self.style_text_ids.add(node.get("id"))
            elif inside:
                self.masked_ids.add(node.get("id"))
                node["textContent"] = self._masked(node.get("textContent"))
        elif inside:
            self.masked_ids.add(node.get("id"))
        for child in node.get("childNodes") or ():
            self.node(child, inside, parent_tag)

    def _is_masked(self, node_id: Any) -> bool:
        return self.whole_page or node_id in self.masked_ids

    def mutation(self, data: dict[str, Any]) -> None:
        for added in data.get("adds") or ():
            if isinstance(added, dict):
                self.node(added.get("node"), self._is_masked(added.get("parentId")))
        for change in data.get("texts") or ():
            if isinstance(change, dict) and self._is_masked(change.get("id")) \
                    and change.get("id") not in self.style_text_ids:
                change["value"] = self._masked(change.get("value"))
        for change in data.get("attributes") or ():
            if not isinstance(change, dict) or not isinstance(change.get("attributes"), dict):
                continue
            attributes = change["attributes"]
            if MASK_CLASS in str(attributes.get("class") or "").split():
                self.masked_ids.add(change.get("id"))
            if self._is_masked(change.get("id")):
                for name, value in attributes.items():
                    attributes[name] = self._attribute(name, value)

    def event(self, event: Any) -> None:
        if not isinstance(event, dict) or not isinstance(event.get("data"), dict):
            return
        data = event["data"]
        if event.get("type") == _FULL_SNAPSHOT:
            self.full_snapshot = True
            self.node(data.get("node"), self.whole_page)
        elif event.get("type") == _INCREMENTAL and data.get("source") == _MUTATION:
            self.mutation(data)
        elif event.get("type") == _INCREMENTAL and data.get("source") == _INPUT \
                and self._is_masked(data.get("id")):
            data["text"] = self._masked(data.get("text"))


def is_personal_page(url: str, patterns: list[str]) -> bool:
    """True when one of the patterns matches the URL."""
    page = PageUrl(url)
    return any(compiled_pattern(pattern).matches(page) for pattern in patterns)


@dataclass(frozen=True)
class Masking:
    """What masking found in one segment."""

    #: Texts and attribute values masked.
    texts: int
    #: The whole page is personal: by its address, by `rr-mask` on `<body>`, or as said before.
    personal_page: bool
    #: The segment holds a full snapshot, so it decides about its page by itself.
    full_snapshot: bool


def mask_personal_text(events: list[Any], page_url: str | None, patterns: list[str], *,
                       personal_before: bool = False) -> Masking:
    """Mask, in place, the text of personal pages and `rr-mask` elements in a segment's rrweb
    events; `personal_before` when an earlier segment showed the page to be personal."""
    urls = [page_url] if page_url else []
    urls += [event["data"]["href"] for event in events
             if isinstance(event, dict) and event.get("type") == _META
             and isinstance(event.get("data"), dict)
             and isinstance(event["data"].get("href"), str)]
    masker = _Masker(whole_page=personal_before
                     or any(is_personal_page(url, patterns) for url in urls))
    for event in events:
        masker.event(event)
    return Masking(masker.count, masker.whole_page, masker.full_snapshot)
