"""The shared browser launcher: Debian's Chromium driven by Playwright, and screenshot paths.

Chromium is /usr/bin/chromium (`make system-deps` installs it); no browser is ever downloaded.
A conftest that needs a browser imports these fixtures (tests/browser, tests/ui).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, async_playwright

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"]
#: Screenshots and other artifacts (git-ignored).
ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"


@pytest.fixture
def chromium_path() -> str:
    """Debian's Chromium; a missing one fails the run rather than skipping the browser tests."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `make system-deps` installs Debian's chromium")
    return CHROMIUM


@pytest.fixture
async def browser(chromium_path: str) -> AsyncIterator[Browser]:
    """Headless Debian Chromium."""
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=chromium_path, headless=True,
                                                    args=CHROMIUM_FLAGS)
        yield launched
        await launched.close()


@pytest.fixture
def artifacts(request: pytest.FixtureRequest) -> Callable[[str], Path]:
    """artifacts(suffix): a path in tests/artifacts/ named after the test."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return lambda suffix: ARTIFACTS / f"{request.node.name}-{suffix}"


async def eventually(check: Callable[[], Awaitable[Any]], *, within: float = 15.0,
                     message: str = "") -> Any:
    """Poll `check` until it returns something truthy, or fail after `within` seconds."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        result = await check()
        if result:
            return result
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail(f"timed out after {within} s: {message}")
        await asyncio.sleep(0.1)
