"""The run's Chromium as a shop's visitor: Chrome's desktop user agent instead of HeadlessChrome.

Headless Chromium says "HeadlessChrome" in its user agent, and the service leaves headless
browsers out of every figure (ingest/intake.py, issue 28 point 14). The folders whose tests play
a shop's visitor (browser/, wordpress/, ui/) start their Chromium through `visitor_chromium`,
which passes `--user-agent` on the command line: a per-page override (Playwright's
`user_agent`) does not reach the beacons a page sends as it is left, a command-line one does.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.browser import running_chromium

#: What Chrome on a Linux desktop sends.
VISITOR_USER_AGENT = ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
                      "Chrome/140.0.0.0 Safari/537.36")


@contextmanager
def visitor_chromium(chromium_path: str) -> Iterator[str]:
    """`running_chromium` with the visitor's user agent; yields its DevTools address."""
    with tempfile.TemporaryDirectory(prefix="visitor-chromium-") as folder:
        launcher = Path(folder) / "chromium"
        launcher.write_text(f'#!/bin/sh\nexec {chromium_path} "--user-agent={VISITOR_USER_AGENT}"'
                            ' "$@"\n')
        launcher.chmod(0o755)
        with running_chromium(str(launcher)) as address:
            yield address
