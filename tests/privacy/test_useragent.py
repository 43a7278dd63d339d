"""Browser, OS and device class derived from real User-Agent headers."""

import pytest
from ua_parser import BasicResolver, Domain, PartialResult, load_builtins

from privacy.useragent import MAX_USER_AGENT_LENGTH, DeviceInfo, UserAgentParser

CHROME_WINDOWS = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/126.0.0.0 Safari/537.36"
)
SAFARI_IPHONE = (
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 "
    "(KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1"
)
SAFARI_IPAD = (
    "Mozilla/5.0 (iPad; CPU OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    "Version/17.5 Mobile/15E148 Safari/604.1"
)
SAFARI_MAC = (
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    "Version/17.5 Safari/605.1.15"
)
FIREFOX_LINUX = "Mozilla/5.0 (X11; Linux x86_64; rv:127.0) Gecko/20100101 Firefox/127.0"
GOOGLEBOT = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
GOOGLEBOT_SMARTPHONE = (
    "Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 "
    "(KHTML, like Gecko) Chrome/126.0.6478.126 Mobile Safari/537.36 "
    "(compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
)
CHROME_ANDROID_TABLET = (
    "Mozilla/5.0 (Linux; Android 13; SM-X700) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/126.0.0.0 Safari/537.36"
)
CHROME_ANDROID_PHONE = (
    "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/126.0.0.0 Mobile Safari/537.36"
)
FIREFOX_ANDROID_TABLET = "Mozilla/5.0 (Android 13; Tablet; rv:127.0) Gecko/127.0 Firefox/127.0"
FIREFOX_ANDROID_PHONE = "Mozilla/5.0 (Android 13; Mobile; rv:127.0) Gecko/127.0 Firefox/127.0"
OPERA_MINI_FEATURE_PHONE = (
    "Opera/9.80 (J2ME/MIDP; Opera Mini/5.1.21214/28.2725; U; ru) Presto/2.8.119 Version/11.10"
)
BLACKBERRY = "BlackBerry9700/5.0.0.351 Profile/MIDP-2.1 Configuration/CLDC-1.1 VendorID/123"
IA_ARCHIVER = "ia_archiver (+http://www.alexa.com/site/help/webmasters; crawler@alexa.com)"
CLAUDEBOT = (
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko; "
    "compatible; ClaudeBot/1.0; +claudebot@anthropic.com)"
)
PETALBOT_MOBILE = (
    "Mozilla/5.0 (Linux; Android 7.0;) AppleWebKit/537.36 (KHTML, like Gecko) Mobile "
    "Safari/537.36 (compatible; PetalBot;+https://webmaster.petalsearch.com/site/petalbot)"
)
HEADLESS_CHROME = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "HeadlessChrome/126.0.0.0 Safari/537.36"
)


@pytest.fixture(scope="module")
def parser() -> UserAgentParser:
    """Build the matchers once for the module, as the application does once per process."""
    return UserAgentParser()


@pytest.mark.parametrize(
    ("user_agent", "expected"),
    [
        (CHROME_WINDOWS, DeviceInfo("Chrome 126", "Windows 10", "desktop")),
        (SAFARI_IPHONE, DeviceInfo("Mobile Safari 17", "iOS 17", "mobile")),
        (SAFARI_IPAD, DeviceInfo("Mobile Safari 17", "iOS 17", "tablet")),
        (SAFARI_MAC, DeviceInfo("Safari 17", "Mac OS X 10", "desktop")),
        (FIREFOX_LINUX, DeviceInfo("Firefox 127", "Linux", "desktop")),
        (GOOGLEBOT, DeviceInfo("Googlebot 2", None, "bot")),
        (GOOGLEBOT_SMARTPHONE, DeviceInfo("Googlebot 2", "Android 6", "bot")),
        (CHROME_ANDROID_TABLET, DeviceInfo("Chrome 126", "Android 13", "tablet")),
        (CHROME_ANDROID_PHONE, DeviceInfo("Chrome Mobile 126", "Android 10", "mobile")),
        (FIREFOX_ANDROID_TABLET, DeviceInfo("Firefox Mobile 127", "Android 13", "tablet")),
        (FIREFOX_ANDROID_PHONE, DeviceInfo("Firefox Mobile 127", "Android 13", "mobile")),
        (OPERA_MINI_FEATURE_PHONE, DeviceInfo("Opera Mini 5", None, "mobile")),
        (BLACKBERRY, DeviceInfo("BlackBerry 9700", "BlackBerry OS 5", "mobile")),
        (IA_ARCHIVER, DeviceInfo("ia_archiver", None, "bot")),
        (CLAUDEBOT, DeviceInfo("ClaudeBot 1", "Mac OS X 10", "bot")),
        # ua-parser names PetalBot's operating system "Other", which tells a reader nothing.
        (PETALBOT_MOBILE, DeviceInfo("PetalBot", None, "bot")),
        (HEADLESS_CHROME, DeviceInfo("HeadlessChrome 126", "Windows 10", "bot")),
    ],
    ids=[
        "chrome-windows",
        "safari-iphone",
        "safari-ipad",
        "safari-mac",
        "firefox-linux",
        "googlebot",
        "googlebot-smartphone",
        "chrome-android-tablet",
        "chrome-android-phone",
        "firefox-android-tablet",
        "firefox-android-phone",
        "opera-mini-feature-phone",
        "blackberry",
        "crawler-known-only-as-a-spider",
        "crawler-posing-as-a-mac",
        "crawler-with-unnamed-os",
        "headless-browser",
    ],
)
def test_a_real_browser_header_gives_browser_os_and_device_class(
    parser: UserAgentParser, user_agent: str, expected: DeviceInfo
) -> None:
    assert parser.parse(user_agent) == expected


@pytest.mark.parametrize("user_agent", ["", "   ", None])
def test_a_missing_or_empty_header_is_entirely_unknown(
    parser: UserAgentParser, user_agent: str | None
) -> None:
    assert parser.parse(user_agent) == DeviceInfo(None, None, "unknown")


def test_a_tool_that_names_no_operating_system_has_an_unknown_device(
    parser: UserAgentParser,
) -> None:
    assert parser.parse("curl/8.5.0") == DeviceInfo("curl 8", None, "unknown")


def test_text_that_is_no_user_agent_at_all_is_unknown(parser: UserAgentParser) -> None:
    assert parser.parse("\x00\u202e<script>alert(1)</script>") == DeviceInfo(None, None, "unknown")


def test_only_the_first_thousand_characters_of_a_header_are_parsed(
    parser: UserAgentParser,
) -> None:
    padding = "x" * (MAX_USER_AGENT_LENGTH - len(FIREFOX_LINUX))
    # The Windows token sits just past the limit, so it must not change the answer.
    header = FIREFOX_LINUX + padding + " (Windows NT 10.0; Win64; x64)"
    assert parser.parse(header) == DeviceInfo("Firefox 127", "Linux", "desktop")


class CountingResolver:
    """Wraps the pure-Python resolver and counts how often a header really gets parsed."""

    def __init__(self) -> None:
        """Start with no parses counted."""
        self.inner = BasicResolver(load_builtins())
        self.calls = 0

    def __call__(self, ua: str, domains: Domain, /) -> PartialResult:
        """Count one real parse and delegate it."""
        self.calls += 1
        return self.inner(ua, domains)


class FailingResolver:
    """Stands for a matcher table that breaks on some input."""

    def __call__(self, ua: str, domains: Domain, /) -> PartialResult:
        """Fail the way a broken replacement group in a pattern would."""
        raise IndexError("no such group")


def test_a_header_the_matchers_choke_on_is_unknown_instead_of_failing_the_request() -> None:
    parser = UserAgentParser(resolver=FailingResolver())
    assert parser.parse(CHROME_WINDOWS) == DeviceInfo(None, None, "unknown")


def test_a_repeated_header_is_parsed_only_once() -> None:
    counting = CountingResolver()
    parser = UserAgentParser(resolver=counting)
    first = parser.parse(CHROME_WINDOWS)
    assert parser.parse(CHROME_WINDOWS) == first
    assert counting.calls == 1


def test_the_cache_forgets_the_least_recently_seen_header_when_full() -> None:
    counting = CountingResolver()
    parser = UserAgentParser(cache_size=2, resolver=counting)
    for header in (CHROME_WINDOWS, FIREFOX_LINUX, CHROME_WINDOWS, SAFARI_IPHONE, FIREFOX_LINUX):
        parser.parse(header)
    # Firefox was the least recently seen when Safari arrived, so only it had to be parsed again.
    assert counting.calls == 4


def test_a_cache_that_could_hold_nothing_is_refused() -> None:
    with pytest.raises(ValueError, match="cache_size"):
        UserAgentParser(cache_size=0)
