"""The shared browser: Debian's Chromium driven by Playwright, and screenshot paths.

Chromium is /usr/bin/chromium (`make system-deps` installs it); no browser is ever downloaded.
One Chromium runs per test process; each test connects to it over the DevTools protocol and
works in contexts of its own, so no state passes between tests.
A conftest that needs a browser imports these fixtures (tests/browser, tests/ui).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, async_playwright

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"]
#: What Chrome on a Linux desktop sends. The tests' Chromium plays a shop's visitor, and the
#: service leaves headless browsers ("HeadlessChrome") out of every figure (ingest/intake.py);
#: only a command-line user agent also reaches the beacons a page sends as it is left.
VISITOR_USER_AGENT = ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
                      "Chrome/140.0.0.0 Safari/537.36")
#: What Playwright's own launch adds and the tests rely on: timers and pages never throttled as
#: background work, no pop-up blocking, stable colours and scrollbars for screenshots.
SHARED_CHROMIUM_FLAGS = CHROMIUM_FLAGS + [
    "--disable-background-timer-throttling", "--disable-backgrounding-occluded-windows",
    "--disable-renderer-backgrounding", "--disable-back-forward-cache",
    "--disable-popup-blocking", "--disable-hang-monitor", "--disable-ipc-flooding-protection",
    "--disable-dev-shm-usage", "--disable-extensions", "--disable-default-apps",
    "--no-default-browser-check", "--password-store=basic", "--use-mock-keychain",
    "--force-color-profile=srgb", "--hide-scrollbars", "--mute-audio", "--enable-automation",
    f"--user-agent={VISITOR_USER_AGENT}", "--remote-debugging-port=0", "about:blank"]
START_TIMEOUT_SECONDS = 30.0
#: Screenshots and other artifacts (git-ignored).
ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"


@pytest.fixture(scope="session")
def chromium_path() -> str:
    """Debian's Chromium; a missing one fails the run rather than skipping the browser tests."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `make system-deps` installs Debian's chromium")
    return CHROMIUM


@contextmanager
def running_chromium(chromium_path: str) -> Iterator[str]:
    """One headless Chromium for the whole run; yields its DevTools address."""
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        process = subprocess.Popen(
            [chromium_path, f"--user-data-dir={profile}", *SHARED_CHROMIUM_FLAGS],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            yield f"http://127.0.0.1:{_devtools_port(Path(profile), process)}"
        finally:
            # Debian's /usr/bin/chromium is a wrapper script: stop its whole process group.
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def _devtools_port(profile: Path, process: subprocess.Popen[bytes]) -> int:
    # Chromium writes the port it chose for --remote-debugging-port=0 into the profile.
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    active_port = profile / "DevToolsActivePort"
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"chromium exited with {process.returncode}")
        lines = active_port.read_text().splitlines() if active_port.exists() else []
        if len(lines) >= 2:
            return int(lines[0])
        time.sleep(0.05)
    raise RuntimeError(f"chromium did not open DevTools within {START_TIMEOUT_SECONDS:.0f} s")


@pytest.fixture(scope="session")
def chromium_devtools(chromium_path: str) -> Iterator[str]:
    """The run's one Chromium (per test process), started on first use."""
    with running_chromium(chromium_path) as address:
        yield address


@pytest.fixture
async def browser(chromium_devtools: str) -> AsyncIterator[Browser]:
    """The run's Chromium, as a Playwright Browser for this test: each `new_context()` or
    `new_page()` is a fresh context (no cookies or storage from other tests), and every context
    the test opened is closed after it."""
    async with async_playwright() as playwright:
        connected = await playwright.chromium.connect_over_cdp(chromium_devtools)
        yield connected
        await connected.close()


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
