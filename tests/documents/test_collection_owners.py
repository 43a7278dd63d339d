"""Each collection family's module owns its collection (issue 29 point 1, docs/architecture.md
"Where things go"): it is the one module that spells the collection's name, and every other
module reaches the collection through it, by a function or by the family's constant. The
families are the raw ones in documents/ and the derived layer's own (derived/, its read models
in derived/views/ excepted: they own none).

A name counts as spelled where the code hands it to the store or keeps it as a name: an
argument of `collection()`, `bucket()`, `Index()` or `Expiry()`, the first argument of a
function (the second after a store), a `collection=` keyword, or a constant assigned it.
The same word as a dictionary key, a kind of export or a figure ("leads", "errors") is not the
collection and is not counted.
"""

from __future__ import annotations

import ast
from collections import defaultdict

from derived import store_setup
from tests.support.code_scan import ROOT, production_modules

#: Calls that name a collection as their first argument whatever their case.
_STORE_CALLS = {"collection", "bucket", "Index", "Expiry"}
#: Dictionary accessors: their first argument is a key (`counts.get("leads")`), not a collection.
_KEY_CALLS = {"get", "pop", "setdefault"}

#: Modules outside the families that may open a collection by a name they are given, and why.
#: They spell no name: each name comes from its family's constant.
GENERIC_WALKERS = {
    # The one table of where a visitor's data lives (VISITOR_DATA), walked generically by the
    # access export and by erasure so that the two cannot drift apart; a family for each entry
    # would be one copy of the walk per collection.
    "privacy/subject_data.py": "finds a visitor's keys in every VISITOR_DATA collection",
    "privacy/export.py": "shows each VISITOR_DATA collection as one section of the export",
    "privacy/erasure.py": "deletes the visitor from each VISITOR_DATA collection",
    # A site's deletion walks the same table for every visitor of the site, then the site's
    # own collections (its SITE_OWN table), as erasure walks one visitor's.
    "privacy/site_deletion.py": "deletes the site from each VISITOR_DATA and SITE_OWN collection",
    # The replay after a restore looks for erased visitors wherever a visitor id is stored.
    "privacy/replay.py": "lists visitor ids in each collection that stores them",
    # The dashboard's read models own no collection: every list pages the same way and every
    # CSV export streams the same way, whichever family's constant they are handed.
    "derived/views/paging.py": "pages any list by keyset over the family's collection it is given",
    "derived/views/exports.py": "counts and streams each CSV export's family collection",
}


def _is_family(module: str) -> bool:
    """A module that may own a collection: a raw family, or one of the derived layer's."""
    return module.startswith("documents/") or (module.startswith("derived/")
                                               and not module.startswith("derived/views/"))


def _callee(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _named(call: ast.Call) -> list[ast.expr]:
    """The arguments of `call` that are in a collection name's place."""
    name = _callee(call)
    args = list(call.args)
    if name in _STORE_CALLS:
        places = args[:1]
    elif name in _KEY_CALLS or not (name[:1].islower() or name.startswith("_")):
        places = []  # a class (a table row such as CsvExport("errors", ...)) or a key lookup
    else:
        after_store = args[1:2] if args and isinstance(args[0], ast.Name | ast.Attribute) else []
        places = args[:1] + after_store
    return places + [keyword.value for keyword in call.keywords if keyword.arg == "collection"]


def _texts(tree: ast.AST) -> list[tuple[str, int]]:
    """Every string constant of `tree` in a collection name's place, with its line."""
    found: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            found.extend(_named(node))
        elif isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            found.append(node.value)
    return [(node.value, node.lineno) for node in found
            if isinstance(node, ast.Constant) and isinstance(node.value, str)]


def _collection_names() -> set[str]:
    """Every collection the service declares or places, and its GridFS bucket names."""
    names = set(store_setup.shard_keys()) | set(store_setup.declared_collections())
    return names | {name.removesuffix(".files") for name in names if name.endswith(".files")}


def _spellings() -> dict[str, dict[str, list[int]]]:
    """For each collection name, the modules that spell it and where."""
    names = _collection_names()
    spelled: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for path in production_modules():
        module = str(path.relative_to(ROOT))
        for text, line in _texts(ast.parse(path.read_text(encoding="utf-8"))):
            if text in names:
                spelled[text][module].append(line)
    return spelled


def test_every_collection_is_spelled_by_one_family_module_only():
    shared = {name: {module: lines for module, lines in modules.items()}
              for name, modules in _spellings().items() if len(modules) > 1}
    assert shared == {}, "a collection's name is spelled outside its family module"


def test_the_one_module_that_spells_a_collection_is_a_family_in_documents_or_derived():
    outside = {name: sorted(modules) for name, modules in _spellings().items()
               if any(not _is_family(module) for module in modules)}
    assert outside == {}


def test_every_declared_collection_has_its_family():
    spelled = _spellings()
    # A GridFS bucket's two collections are named by the bucket's name.
    owned = [name.removesuffix(".files").removesuffix(".chunks")
             for name in store_setup.declared_collections()]
    assert sorted(name for name in owned if name not in spelled) == []


def test_only_the_walkers_of_the_visitor_data_table_open_collections_outside_the_families():
    opening = sorted(
        str(path.relative_to(ROOT)) for path in production_modules()
        if not _is_family(path.relative_to(ROOT).as_posix())
        and any(isinstance(node, ast.Call) and _callee(node) == "collection"
                for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))))
    assert opening == sorted(GENERIC_WALKERS)


def test_the_scan_sees_a_spelled_name():
    # The scan itself: a collection handed to the store by name, as a constant, or through a
    # helper after the store is found; a dictionary key of the same word is not.
    code = ('RECORDINGS = "recordings"\n'
            'store.collection("leads")\n'
            'keyset_page(store, "visitors", {})\n'
            'counts.get("errors")\n'
            'CsvExport("orders", ORDERS)\n')
    assert [text for text, _ in _texts(ast.parse(code))] == ["recordings", "leads", "visitors"]
