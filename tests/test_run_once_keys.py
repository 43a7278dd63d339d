"""Every RUN_ONCE key (tests/conftest.py) names a folder, a module or a test that exists: a key
left behind by a rename would keep nothing off the wire and still read as a reason."""

from __future__ import annotations

import ast

from tests.conftest import RUN_ONCE, TESTS_ROOT


def _test_names(module: str) -> set[str]:
    tree = ast.parse((TESTS_ROOT / module).read_text(encoding="utf-8"))
    return {node.name for node in tree.body
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}


def test_every_run_once_key_names_a_folder_module_or_test_that_exists():
    stale = []
    for key in RUN_ONCE:
        path, _, name = key.partition("::")
        if not (TESTS_ROOT / path).exists() or (name and name not in _test_names(path)):
            stale.append(key)
    assert stale == []
