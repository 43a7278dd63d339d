"""An axe-core check run inside the page: no serious or critical accessibility violation.

axe-core comes from the npm registry (dashboard/package.json's devDependencies, installed by
`make dashboard`). It is evaluated through the DevTools protocol, which the page's strict
Content-Security-Policy does not govern, so the policy under test stays exactly as served.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.async_api import Page

AXE = (Path(__file__).resolve().parents[2] / "dashboard" / "node_modules" / "axe-core"
       / "axe.min.js")
#: The impacts that fail a page; "minor" and "moderate" findings are left to review.
BLOCKING = ("serious", "critical")

_RUN = """async () => {
  const result = await axe.run(document, { resultTypes: ['violations'] });
  return result.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.slice(0, 3).map((node) => node.target.join(' ')) }));
}"""


async def assert_accessible(page: Page, where: str) -> None:
    """Fail when axe-core finds a serious or critical violation on the page as it is now."""
    if not AXE.exists():
        pytest.fail(f"{AXE} is missing: run `make dashboard` (npm install in dashboard/)")
    if not await page.evaluate("typeof window.axe === 'object'"):
        await page.evaluate(AXE.read_text(encoding="utf-8"))
    violations = await page.evaluate(_RUN)
    blocking = [v for v in violations if v["impact"] in BLOCKING]
    assert not blocking, f"axe-core on {where}: {blocking}"
