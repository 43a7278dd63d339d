"""Handler modules share a toolkit and never import one another (issue 29 point 4)."""

from __future__ import annotations

import ast
from pathlib import Path

HANDLERS = Path(__file__).resolve().parents[2] / "handlers"
#: What every handler module may import from handlers/: the base handler, the dependencies,
#: the schema validator and the two toolkits (the dashboard's and the ingest endpoints').
TOOLKIT = {"base", "deps", "validation", "site_api", "ingest_api"}


def sibling_imports(source: str) -> set[str]:
    """The handlers/ modules `source` imports that are not part of the toolkit."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module == "handlers":
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("handlers."):
            found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            found.update(alias.name.split(".")[1] for alias in node.names
                         if alias.name.startswith("handlers."))
    return found - TOOLKIT


def test_no_handler_module_imports_a_sibling_outside_the_toolkit():
    imports = {path.name: sibling_imports(path.read_text(encoding="utf-8"))
               for path in sorted(HANDLERS.glob("*.py"))}
    assert {name: found for name, found in imports.items() if found} == {}


def test_the_check_catches_a_sibling_import():
    assert sibling_imports("from handlers.data_api import SITE_ID\nfrom handlers import ui\n"
                           "import handlers.sdk\nfrom handlers.site_api import UUID\n") == {
        "data_api", "ui", "sdk"}
