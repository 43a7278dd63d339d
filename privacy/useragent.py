"""Browser, operating system and device class from a User-Agent header, using ua-parser 1.x.

Only coarse facts are derived: browser and OS family with their major version, and a device
class. The raw header is never logged or stored; it lives on only as a key of the parser's
in-memory cache, which forgets it as newer headers arrive.
"""

import functools
import re
from dataclasses import dataclass
from typing import Literal

from ua_parser import (
    OS,
    BasicResolver,
    Device,
    Parser,
    Resolver,
    UserAgent,
    load_builtins,
    load_lazy_builtins,
)

DeviceType = Literal["desktop", "mobile", "tablet", "bot", "unknown"]

# Headers are attacker-controlled and the matchers are hundreds of regular expressions; real
# browser strings stay far below this, so cutting here bounds parse time and cache memory.
MAX_USER_AGENT_LENGTH = 1000
DEFAULT_CACHE_SIZE = 2048

# ua-parser reports a family it could not determine as "Other"; that carries no information.
_UNKNOWN_FAMILY = "Other"
# Crawlers ua-parser leaves out of its "Spider" device class (ClaudeBot claims to be a Mac) still
# name themselves like this, and headless browsers are automation rather than visitors.
_BOT_FAMILY = re.compile(r"bot|crawl|spider|slurp|headless", re.IGNORECASE)
_TABLET_DEVICE_FAMILIES = frozenset({"iPad", "Kindle", "Generic Tablet"})
_PHONE_DEVICE_FAMILIES = frozenset(
    {"iPhone", "iPod", "Generic Smartphone", "Generic Feature Phone"}
)
_MOBILE_OS_FAMILIES = frozenset(
    {
        "iOS",
        "Android",
        "Windows Phone",
        "BlackBerry OS",
        "KaiOS",
        "Symbian OS",
        "Nokia Series 40",
        "Firefox OS",
    }
)


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """What a User-Agent says about the visitor's software and device; None means unknown."""

    browser: str | None = None
    os: str | None = None
    device_type: DeviceType = "unknown"


_UNKNOWN = DeviceInfo()


class UserAgentParser:
    """Parses User-Agent headers, remembering the most recent distinct ones in a bounded LRU cache.

    Create one per application: building the matchers takes tens of milliseconds, and the cache
    makes the repeated headers of one visitor's session nearly free.
    """

    def __init__(
        self, cache_size: int = DEFAULT_CACHE_SIZE, *, resolver: Resolver | None = None
    ) -> None:
        """Cache up to cache_size distinct headers in front of resolver (default: the fastest)."""
        if cache_size < 1:
            raise ValueError(f"cache_size must be at least 1, got {cache_size}")
        engine = resolver if resolver is not None else _fastest_resolver()
        self._parser = Parser(engine)
        # The cache holds the finished DeviceInfo, so a repeated header costs one lookup rather
        # than a parse-result lookup plus the classification below.
        self._describe = functools.lru_cache(maxsize=cache_size)(self._describe_uncached)

    def parse(self, user_agent: str | None) -> DeviceInfo:
        """Return browser, OS and device class of a User-Agent header; never raises."""
        if not isinstance(user_agent, str):
            return _UNKNOWN
        text = user_agent[:MAX_USER_AGENT_LENGTH]
        if not text:
            return _UNKNOWN
        return self._describe(text)

    def _describe_uncached(self, text: str) -> DeviceInfo:
        try:
            result = self._parser.parse(text)
        except Exception:
            # The matcher tables are third-party data updated monthly; one bad pattern must cost
            # a visit its device details, never fail the request that carried the header.
            return _UNKNOWN
        return DeviceInfo(
            browser=_family_and_major(result.user_agent),
            os=_family_and_major(result.os),
            device_type=_device_type(text, result.user_agent, result.os, result.device),
        )


def _fastest_resolver() -> Resolver:
    """Return the Rust-backed resolver when ua-parser-rs is installed, else the pure-Python one."""
    try:
        # Imported here because ua-parser-rs is the optional "regex" extra of ua-parser.
        from ua_parser.regex import Resolver as RegexResolver
    except ImportError:
        return BasicResolver(load_builtins())
    # The Rust resolver compiles the patterns itself, so the lazy matchers avoid compiling twice.
    return RegexResolver(load_lazy_builtins())


def _known(family: str | None) -> str | None:
    """Return a family name, or None for ua-parser's placeholder for an unknown family."""
    if family is None or family == _UNKNOWN_FAMILY or not family.strip():
        return None
    return family


def _family_and_major(part: UserAgent | OS | None) -> str | None:
    """Return e.g. 'Chrome 126' or 'Linux' for a parsed browser or OS, or None when unknown."""
    if part is None:
        return None
    family = _known(part.family)
    if family is None:
        return None
    return f"{family} {part.major}" if part.major else family


def _device_type(
    text: str, browser: UserAgent | None, os: OS | None, device: Device | None
) -> DeviceType:
    """Classify the device from the parsed parts and the header's own "Mobi" token."""
    browser_family = _known(browser.family) if browser else None
    os_family = _known(os.family) if os else None
    device_family = _known(device.family) if device else None
    if device_family == "Spider" or (browser_family and _BOT_FAMILY.search(browser_family)):
        return "bot"
    # Browsers mark phones with a "Mobi" token (Mozilla's documented advice for detection) and
    # Android tablets are the Android devices that omit it.
    has_mobile_token = "Mobi" in text
    if device_family in _TABLET_DEVICE_FAMILIES or (
        os_family == "Android" and not has_mobile_token
    ):
        return "tablet"
    if (
        device_family in _PHONE_DEVICE_FAMILIES
        or has_mobile_token
        or os_family in _MOBILE_OS_FAMILIES
    ):
        return "mobile"
    if os_family is not None:
        return "desktop"
    return "unknown"
