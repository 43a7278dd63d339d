"""The customer's own pages (checkout, order received, My Account): recorded without their text.

The plugin puts the class `rr-mask` on `<body>` there and rrweb masks the text in the browser
(issue 33 point 6); this is the server's side, so that a modified page or loader cannot bring
the text back. The segment sweeper (ingest/segment_sweeper.py) hands every segment's rrweb
events to `mask_personal_text`, which rewrites them in place. A page is personal, and masked
whole, head included (its title, the words of its meta tags), when:

* one of the site's `personalPages` patterns (excluded-URL syntax, privacy/exclusion.py;
  WooCommerce's own addresses by default) matches the URL the segment was sent for or one its
  meta events name;
* or the segment's full snapshot (or a node it adds) shows `rr-mask` on `<html>` or `<body>`;
* or the segment begins a page (rrweb's meta event) without its snapshot: the body is unseen;
* or the segment does not begin a page and the segment sent before it was personal
  (`personal_before`): such a segment names nodes only by id. Unknown (None), the segment is
  left as it is and said to be `undecided`; the sweeper holds it until it is known.

Elsewhere an element carrying `rr-mask`, and what is inside it, is masked as rrweb does it.
Masking is rrweb's own: each character that is not whitespace becomes `*`, so the replay keeps
its layout. It covers text nodes (style sheets excepted: they are the page's look, not its
content), text changes, typed input, the attributes that carry words (`value`, `placeholder`,
`title`, `alt`, `aria-label`, a meta tag's `content`…), and the address of `mailto:` and `tel:`
links. A personal page's custom events (rrweb type 5, a script's own tag and payload) are
dropped: the replay does not need them and nothing in them can be told safe.

On every page, personal or not, the URLs the events carry (a meta event's `href`, the `href`,
`src`, `srcset`, `action`… attributes) lose their secret parameters (privacy/url_secrets.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from documents.sites import DEFAULT_SETTINGS
from privacy.exclusion import PageUrl, checked_pattern_list, compiled_pattern
from privacy.url_secrets import DEFAULT_SECRET_PARAMETERS, strip_secrets, strip_secrets_in_text

#: Until the owner sets some: WooCommerce's checkout and My Account (documents/sites.py).
DEFAULT_PERSONAL_PAGES = tuple(DEFAULT_SETTINGS["personalPages"])
#: Patterns per site: a shop's own pages, few enough to try on every segment.
MAX_PERSONAL_PAGES = 50
#: rrweb's default `maskTextClass`, which the plugin puts on `<body>`.
MASK_CLASS = "rr-mask"
#: Attributes whose value is text a visitor reads (or typed). `content` is a meta tag's (a
#: description, `og:title`) or RDFa's.
TEXT_ATTRIBUTES = frozenset({
    "value", "placeholder", "title", "alt", "label", "aria-label", "aria-description",
    "aria-valuetext", "aria-placeholder", "aria-roledescription", "data-title", "content",
})
#: Meta tags (by `name` or `http-equiv`) whose `content` is how the page is shown, not words
#: about it; every other meta tag's content is masked on a personal page.
TECHNICAL_METAS = frozenset({
    "viewport", "theme-color", "color-scheme", "robots", "referrer", "format-detection",
    "content-type", "x-ua-compatible",
})
#: Attributes holding one URL, and those holding several (`srcset`'s candidates, `ping`).
URL_ATTRIBUTES = frozenset({
    "href", "src", "action", "formaction", "poster", "cite", "data", "background", "xlink:href",
})
URL_LIST_ATTRIBUTES = frozenset({"srcset", "imagesrcset", "ping"})
#: Link schemes whose address is a person's (e-mail, phone).
PERSONAL_LINK = re.compile(r"^\s*(mailto|tel|sms):", re.I)

# rrweb's numbers: event types, incremental sources and serialised node types.
_FULL_SNAPSHOT, _INCREMENTAL, _META, _CUSTOM = 2, 3, 4, 5
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


def _items(value: Any) -> Iterable[Any]:
    """A list from the events as it is, anything else (a hostile shape) as nothing."""
    return value if isinstance(value, list) else ()


def _classes(attributes: Any) -> list[str]:
    return str(attributes.get("class") or "").split() if isinstance(attributes, dict) else []


def _tag(node: dict[str, Any]) -> str:
    return str(node.get("tagName") or "").lower()


def _is_technical_meta(attributes: dict[str, Any]) -> bool:
    kind = attributes.get("name") or attributes.get("http-equiv") or ""
    return str(kind).strip().lower() in TECHNICAL_METAS


class _Masker:
    """Rewrites one segment's events; remembers which nodes lie inside a masked element."""

    def __init__(self, whole_page: bool, secret_names: frozenset[str]) -> None:
        self.whole_page = whole_page
        self.secret_names = secret_names
        self.masked_ids: set[Any] = set()
        self.style_text_ids: set[Any] = set()
        self.texts = 0
        self.urls = 0

    def _masked(self, text: Any) -> Any:
        if not isinstance(text, str):
            return text
        masked = mask(text)
        # Text rrweb masked already is left alone and not counted.
        if masked != text:
            self.texts += 1
        return masked

    def _url(self, name: str, value: str) -> str:
        stripped = (strip_secrets_in_text(value, self.secret_names) if name in URL_LIST_ATTRIBUTES
                    else strip_secrets(value, self.secret_names))
        if stripped != value:
            self.urls += 1
        return stripped

    def _attribute(self, name: Any, value: Any, masked: bool, *, words: bool = True) -> Any:
        """The attribute's value: URLs without their secrets; when `masked`, words masked
        (`words` False for a technical meta tag's `content`)."""
        if not isinstance(value, str) or not isinstance(name, str):
            return value
        lowered = name.lower()
        if lowered in URL_ATTRIBUTES or lowered in URL_LIST_ATTRIBUTES:
            value = self._url(lowered, value)
        if not masked:
            return value
        if lowered in TEXT_ATTRIBUTES and (words or lowered != "content"):
            return self._masked(value)
        if lowered == "href" and PERSONAL_LINK.match(value):
            scheme, _, address = value.partition(":")
            return f"{scheme}:{self._masked(address)}"
        return value

    def node(self, node: Any, inside: bool, parent_tag: str = "") -> None:
        """Rewrite a serialised node and its children; masked when inside a masked element."""
        if not isinstance(node, dict):
            return
        kind = node.get("type")
        if kind == _ELEMENT:
            attributes = node.get("attributes")
            inside = inside or MASK_CLASS in _classes(attributes)
            if inside:
                self.masked_ids.add(node.get("id"))
            parent_tag = _tag(node)
            if isinstance(attributes, dict):
                words = not (parent_tag == "meta" and _is_technical_meta(attributes))
                for name, value in attributes.items():
                    attributes[name] = self._attribute(name, value, inside, words=words)
        elif kind in (_TEXT, _CDATA, _COMMENT):
            if node.get("isStyle") or parent_tag == "style":
                self.style_text_ids.add(node.get("id"))
            elif inside:
                self.masked_ids.add(node.get("id"))
                node["textContent"] = self._masked(node.get("textContent"))
        elif inside:
            self.masked_ids.add(node.get("id"))
        for child in _items(node.get("childNodes")):
            self.node(child, inside, parent_tag)

    def _is_masked(self, node_id: Any) -> bool:
        return self.whole_page or node_id in self.masked_ids

    def mutation(self, data: dict[str, Any]) -> None:
        for added in _items(data.get("adds")):
            if isinstance(added, dict):
                self.node(added.get("node"), self._is_masked(added.get("parentId")))
        for change in _items(data.get("texts")):
            if isinstance(change, dict) and self._is_masked(change.get("id")) \
                    and change.get("id") not in self.style_text_ids:
                change["value"] = self._masked(change.get("value"))
        for change in _items(data.get("attributes")):
            if not isinstance(change, dict) or not isinstance(change.get("attributes"), dict):
                continue
            attributes = change["attributes"]
            if MASK_CLASS in _classes(attributes):
                self.masked_ids.add(change.get("id"))
            masked = self._is_masked(change.get("id"))
            for name, value in attributes.items():
                attributes[name] = self._attribute(name, value, masked)

    def event(self, event: Any) -> None:
        if not isinstance(event, dict) or not isinstance(event.get("data"), dict):
            return
        data = event["data"]
        kind = event.get("type")
        if kind == _META and isinstance(data.get("href"), str):
            data["href"] = self._url("href", data["href"])
        elif kind == _FULL_SNAPSHOT:
            self.node(data.get("node"), self.whole_page)
        elif kind == _INCREMENTAL and data.get("source") == _MUTATION:
            self.mutation(data)
        elif kind == _INCREMENTAL and data.get("source") == _INPUT \
                and self._is_masked(data.get("id")):
            data["text"] = self._masked(data.get("text"))


def is_personal_page(url: str, patterns: list[str]) -> bool:
    """True when one of the patterns matches the URL."""
    page = PageUrl(url)
    return any(compiled_pattern(pattern).matches(page) for pattern in patterns)


def _masks_the_page(node: Any) -> bool:
    """True when an `<html>` or `<body>` in the serialised node carries `rr-mask`."""
    if not isinstance(node, dict):
        return False
    if node.get("type") == _ELEMENT and _tag(node) in _PAGE_ELEMENTS \
            and MASK_CLASS in _classes(node.get("attributes")):
        return True
    return any(_masks_the_page(child) for child in _items(node.get("childNodes")))


def _of_type(events: list[Any], kind: int) -> list[dict[str, Any]]:
    """The data of the events of one rrweb type."""
    return [event["data"] for event in events if isinstance(event, dict)
            and event.get("type") == kind and isinstance(event.get("data"), dict)]


def _serialised_nodes(events: list[Any]) -> Iterable[Any]:
    """The nodes the segment serialises: its full snapshots' and those its mutations add."""
    for data in _of_type(events, _FULL_SNAPSHOT):
        yield data.get("node")
    for data in _of_type(events, _INCREMENTAL):
        if data.get("source") == _MUTATION:
            yield from (added.get("node") for added in _items(data.get("adds"))
                        if isinstance(added, dict))


@dataclass(frozen=True)
class Masking:
    """What masking found in one segment."""

    #: Texts and attribute values masked.
    texts: int
    #: The whole page is personal: by its address, by `rr-mask` on `<body>`, or as said before.
    personal_page: bool
    #: URLs that lost secret parameters.
    urls: int = 0
    #: Custom events dropped.
    custom_events: int = 0
    #: Whether the page is personal depends on the segment before, unknown: nothing was done.
    undecided: bool = False

    @property
    def changed(self) -> bool:
        """The events were rewritten."""
        return bool(self.texts or self.urls or self.custom_events)


def mask_personal_text(events: list[Any], page_url: str | None, patterns: list[str], *,
                       personal_before: bool | None = False,
                       secret_names: frozenset[str] = DEFAULT_SECRET_PARAMETERS) -> Masking:
    """Mask, in place, the text of personal pages and `rr-mask` elements in a segment's rrweb
    events, and strip secret parameters from their URLs; `personal_before` says whether the
    segment sent before this one was of a personal page (None: not known yet)."""
    urls = [page_url] if page_url else []
    metas = _of_type(events, _META)
    urls += [data["href"] for data in metas if isinstance(data.get("href"), str)]
    has_snapshot = bool(_of_type(events, _FULL_SNAPSHOT))
    starts_page = has_snapshot or bool(metas)
    personal = any(is_personal_page(url, patterns) for url in urls) \
        or any(_masks_the_page(node) for node in _serialised_nodes(events))
    if not personal and starts_page and not has_snapshot:
        # A page's beginning whose snapshot went in the next segment: its body is unseen.
        personal = True
    if not personal and not starts_page:
        if personal_before is None:
            return Masking(0, False, undecided=True)
        personal = personal_before
    dropped = 0
    if personal:
        kept = [event for event in events
                if not (isinstance(event, dict) and event.get("type") == _CUSTOM)]
        dropped = len(events) - len(kept)
        events[:] = kept
    masker = _Masker(personal, secret_names)
    for event in events:
        masker.event(event)
    return Masking(masker.texts, personal, masker.urls, dropped)
