"""No production module patches a third-party library: libraries are used as shipped."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIRST_PARTY = {"auth", "config", "derived", "documents", "errors", "handlers", "ingest",
               "instants", "privacy", "realtime", "server", "tasks"}
PRODUCTION = [path for package in sorted(FIRST_PARTY)
              for path in ([ROOT / f"{package}.py"] if (ROOT / f"{package}.py").exists()
                           else sorted((ROOT / package).rglob("*.py")))]


def _third_party_names(tree: ast.Module) -> set[str]:
    """Names a module binds to third-party modules, classes or functions by importing them."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] not in FIRST_PARTY:
                    names.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] not in FIRST_PARTY and node.module != "__future__":
                names.update(alias.asname or alias.name for alias in node.names)
    return names


def _root(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute | ast.Subscript):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def patches_in(path: Path) -> list[str]:
    """Assignments to an attribute of something imported from a third-party package."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported = _third_party_names(tree)
    found = []
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("setattr", "delattr") and node.args):
            if _root(node.args[0]) in imported:
                found.append(f"{path}:{node.lineno}")
            continue
        for target in targets:
            if isinstance(target, ast.Attribute) and _root(target) in imported:
                found.append(f"{path}:{node.lineno}")
    return found


def test_no_production_module_assigns_to_a_third_party_module_or_class():
    assert PRODUCTION, "no production modules found"
    assert [hit for path in PRODUCTION for hit in patches_in(path)] == []


def test_the_check_catches_a_patch(tmp_path):
    """The scan is not vacuous: a module patching mongomock is reported."""
    sample = tmp_path / "patching.py"
    sample.write_text("from mongomock import collection\nimport copy as c\n"
                      "from documents import store\nstore.x = 1\n"
                      "collection.copy = None\nc.deepcopy = len\nsetattr(collection, 'x', 1)\n")
    assert len(patches_in(sample)) == 3
