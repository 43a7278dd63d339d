"""The import layers hold (import-linter's contracts in pyproject.toml)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_import_respects_the_layers():
    lint_imports = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert lint_imports, "import-linter is a dev dependency: pip install -e '.[dev]'"
    result = subprocess.run([lint_imports, "--no-cache"], cwd=ROOT, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
