"""Fast paths for the embedded engine's inserts, and its reads and writes of one document by `_id`.

mongomock answers `find_one`, `update_one`, `find_one_and_update` and `insert_one` through
generic machinery: cursors, projection specs, a deep-copied snapshot of the document to detect a
change, one BSON encode per `$set` field, (for `find_one_and_update`) two extra `find_one` calls,
and (for `insert_one`) a generic datetime walk and unique-index pass behind mongomock-motor's
error wrapper. For the calls the ingest path makes on every request (visitors.touch,
visitors.privacy_flags, activity.append_pageview, error_outbox.holds_job and keep_job) that
machinery cost most of the request.

`enable_fast_id_operations` routes those calls through code that does only what mongomock would
do for them, when that is certain: the filter pins `_id` to a plain scalar, the document exists
(or, for an insert, its `_id` is new or missing), every operator and value is one whose effect is
reproduced here exactly, and nothing depends on what the fast path skips (unique indexes,
sessions, hints, sorts, positional or array paths, upserts that insert, validation bypass).
Everything else, and every input this module is unsure of, runs mongomock's own code untouched;
so does an insert of a duplicate `_id`, whose error mongomock-motor enriches.
tests/documents/test_embedded_fast_updates.py and test_embedded_fast_inserts.py check that the
two agree on results, exceptions, stored documents and changes to the caller's arguments, for
generated inputs in and out of that subset.

The code mirrors mongomock 4.3 (collection.py: `_insert`, `_update`, `_apply_update_document`,
`_find_and_modify`, `_copy_only_fields`) with PyMongo 4; other versions keep mongomock's code.
"""

from __future__ import annotations

import collections
import functools
import zoneinfo
from datetime import datetime, timezone
from typing import Any

import bson
import mongomock
from bson import BSON, ObjectId
from bson.tz_util import FixedOffset
from mongomock import collection as mongomock_collection
from mongomock import helpers as mongomock_helpers

#: The mongomock release series whose internals the fast paths reproduce.
MONGOMOCK_SERIES = "4.3."


class _Unsupported(Exception):
    """An input the fast path does not reproduce; mongomock's own code takes the call."""


#: "Not handled here": the wrapper then calls mongomock's own method.
_FALLBACK = object()
#: A field that is not in the document.
_MISSING = object()

#: `_id` values looked up directly (bool is excluded: `{"_id": True}` also matches 1).
_ID_TYPES = frozenset({str, int, ObjectId})
#: Leaves that mongomock's datetime walk and copies keep as they are.
_SCALARS = frozenset({str, int, float, bool, type(None), bytes, ObjectId})
#: Leaves whose equality is plain value equality, so a change is certain when it is unequal.
_ATOMS = _SCALARS | {datetime}
#: Values whose equality with one another is known: atoms, dicts and lists.
_KNOWN_KINDS = _ATOMS | {dict, list}
_NUMBERS = frozenset({int, float})
#: Documents and embedded documents as mongomock stores them: an upsert stores an OrderedDict
#: (its `_discard_operators` builds one), an insert or a `$set` a dict.
_DICTS = frozenset({dict, collections.OrderedDict})
#: Time zones whose `utcoffset` never fails or returns None, so mongomock's datetime
#: conversion behaves the same each time it runs.
_SAFE_TZ = frozenset({timezone, FixedOffset, zoneinfo.ZoneInfo})

_OPERATORS = frozenset({"$set", "$unset", "$inc", "$min", "$max", "$push", "$addToSet",
                        "$setOnInsert"})
_ARRAY_OPERATORS = frozenset({"$push", "$addToSet"})
_PUSH_MODIFIERS = frozenset({"$each", "$slice"})


def enable_fast_id_operations(cls: Any) -> bool:
    """Give mongomock's `Collection` (`cls`) the fast paths; False when its version differs.

    The originals stay on `cls._visitor_service_generic`; setting the class attribute
    `_visitor_service_fast_paths` to False makes every call take them (the differential tests
    compare the two that way).
    """
    if not mongomock.__version__.startswith(MONGOMOCK_SERIES):
        return False
    generic_find_one = cls.find_one
    generic_update_one = cls.update_one
    generic_find_one_and_update = cls.find_one_and_update
    generic_insert_one = cls.insert_one
    after = mongomock_collection.ReturnDocument.AFTER

    def find_one(self: Any, filter: Any = None, *args: Any, **kwargs: Any) -> Any:
        """mongomock's `find_one`, by `_id` without a cursor."""
        if self._visitor_service_fast_paths and type(filter) is dict:
            found = _find_one(self, filter, args, kwargs)
            if found is not _FALLBACK:
                return found
        return generic_find_one(self, filter, *args, **kwargs)

    def update_one(self: Any, filter: Any, update: Any, upsert: bool = False,
                   bypass_document_validation: bool = False, collation: Any = None,
                   array_filters: Any = None, hint: Any = None, session: Any = None,
                   let: Any = None) -> Any:
        """mongomock's `update_one`, by `_id` in place on an existing document."""
        # mongomock ignores falsy options and refuses (or, if told to, ignores) truthy ones.
        if self._visitor_service_fast_paths and not (
                collation or array_filters or hint or session or let):
            result = _update_one(self, filter, update)
            if result is not _FALLBACK:
                return result
        return generic_update_one(
            self, filter, update, upsert=upsert,
            bypass_document_validation=bypass_document_validation, collation=collation,
            array_filters=array_filters, hint=hint, session=session, let=let)

    def find_one_and_update(self: Any, filter: Any, update: Any,
                            projection: Any = None, sort: Any = None, upsert: bool = False,
                            return_document: Any = mongomock_collection.ReturnDocument.BEFORE,
                            **kwargs: Any) -> Any:
        """mongomock's `find_one_and_update`, by `_id` with one lookup instead of two or
        three."""
        # Other keywords (`new`, `remove`, ...) change `_find_and_modify`; a truthy session
        # is refused by it.
        if (self._visitor_service_fast_paths and sort is None
                and all(key == "session" for key in kwargs) and not kwargs.get("session")):
            result = _find_one_and_update(self, filter, update, projection,
                                          return_document is after)
            if result is not _FALLBACK:
                return result
        return generic_find_one_and_update(
            self, filter, update, projection=projection, sort=sort, upsert=upsert,
            return_document=return_document, **kwargs)

    def insert_one(self: Any, document: Any, bypass_document_validation: bool = False,
                   session: Any = None) -> Any:
        """mongomock's `insert_one` of a plain document, without its generic walk."""
        # mongomock refuses a truthy session; bypassing validation skips its mapping check.
        if self._visitor_service_fast_paths and not (bypass_document_validation or session):
            result = _insert_one(self, document)
            if result is not _FALLBACK:
                return result
        return generic_insert_one(self, document,
                                  bypass_document_validation=bypass_document_validation,
                                  session=session)

    cls._visitor_service_generic = {
        "find_one": generic_find_one,
        "update_one": generic_update_one,
        "find_one_and_update": generic_find_one_and_update,
        "insert_one": generic_insert_one,
    }
    cls._visitor_service_fast_paths = True
    cls.find_one = find_one
    cls.update_one = update_one
    cls.find_one_and_update = find_one_and_update
    cls.insert_one = insert_one
    return True


# The four operations -------------------------------------------------------------------------


def _find_one(self: Any, filter_: dict[str, Any], args: tuple[Any, ...],
              kwargs: dict[str, Any]) -> Any:
    """`find_one(filter_, *args, **kwargs)` as mongomock answers it, or _FALLBACK."""
    if type(filter_.get("_id")) not in _ID_TYPES or len(args) > 1:
        return _FALLBACK
    projection = args[0] if args else None
    for key, value in kwargs.items():
        # `find` accepts a session and ignores it; any other option changes the cursor.
        if key == "projection" and not args:
            projection = value
        elif key != "session":
            return _FALLBACK
    plan = _projection_plan(projection)
    if plan is _FALLBACK:
        return _FALLBACK
    try:
        document = _matching_document(self, filter_)
    except Exception:  # _Unsupported, or a filter mongomock refuses: let it refuse
        return _FALLBACK
    if document is None:
        return None
    return _project(self, document, projection, plan)


def _update_one(self: Any, filter_: Any, update: Any) -> Any:
    """`update_one(filter_, update)` on an existing document, or _FALLBACK."""
    planned = _plan_update(self, filter_, update, need_change=True)
    if planned is _FALLBACK:
        return _FALLBACK
    document, actions, certain_change = planned
    if not certain_change:
        # mongomock reports "modified" by comparing the document with a deep copy taken before
        # the update; when no step certainly changed it, its own code gives the exact answer.
        return _FALLBACK
    _apply(document, actions)
    return mongomock_collection.UpdateResult({
        "connectionId": self.database.client._id,
        "err": None,
        "n": 1,
        "nModified": 1,
        "ok": 1,
        "upserted": None,
        "updatedExisting": True,
    }, acknowledged=True)


def _find_one_and_update(self: Any, filter_: Any, update: Any, projection: Any,
                         return_after: bool) -> Any:
    """`find_one_and_update` on an existing document, or _FALLBACK.

    mongomock's `_find_and_modify` reads the projected pre-image, updates by `_id` (the
    modified count is discarded) and, for AFTER, reads the projected post-image; so does this.
    """
    plan = _projection_plan(projection)
    if plan is _FALLBACK:
        return _FALLBACK
    planned = _plan_update(self, filter_, update, need_change=False)
    if planned is _FALLBACK:
        return _FALLBACK
    document, actions, _ = planned
    before = _project(self, document, projection, plan)
    if not before:
        # An empty pre-image makes mongomock skip the update unless upserting (it tests the
        # projected document's truth, not whether one matched); its own code handles that.
        return _FALLBACK
    _apply(document, actions)
    if return_after:
        return _project(self, document, projection, plan)
    return before


def _insert_one(self: Any, document: Any) -> Any:
    """`insert_one(document)` as mongomock's `_insert` does it, or _FALLBACK.

    mongomock checks the keys (strings, no NUL, no top-level "$"), BSON-encodes the document
    (which refuses what MongoDB cannot store), sets a missing `_id` on the caller's document,
    stores a copy with datetimes converted and then checks the unique indexes. Here the same
    checks pass or the call falls back before anything is changed; only a taken `_id` falls
    back later, with a missing `_id` set as mongomock sets it before it raises.
    """
    if type(document) is not dict:
        return _FALLBACK  # mongomock's mapping check and walk treat other mappings apart
    documents = self._store
    if _has_unique_index(documents):
        return _FALLBACK  # checked after storing, with a rollback and mongomock-motor's details
    doc_id = document.get("_id", _MISSING)
    if doc_id is not _MISSING and type(doc_id) not in _ID_TYPES:
        return _FALLBACK  # dicts, lists, floats, datetimes: hashed, refused or converted
    try:
        stored = _stored_copy(document)
        # BSON refuses keys that are not strings or hold a NUL, ints beyond 64 bits and
        # unencodable strings. The copy differs from the document only in datetimes, converted
        # without error above, so encoding it (naive datetimes are cheaper) refuses exactly what
        # mongomock's encoding of the document does.
        bson.encode(stored, False)
        for key in document:
            if key.startswith("$"):
                return _FALLBACK
    except Exception:  # _Unsupported, or an input mongomock refuses: let it refuse
        return _FALLBACK
    if doc_id is _MISSING:
        # Set on the caller's document, as PyMongo and mongomock do; last in both, as there.
        doc_id = document["_id"] = stored["_id"] = mongomock_collection.ObjectId()
    if not _store_new(documents, doc_id, stored):
        # mongomock's own code raises the DuplicateKeyError (through mongomock-motor's wrapper
        # of `_insert`, where there is one); the `_id` it would have set is already set.
        return _FALLBACK
    return mongomock_collection.InsertOneResult(doc_id, acknowledged=True)


def _store_new(documents: Any, doc_id: Any, stored: dict[str, Any]) -> bool:
    """Store `stored` under `doc_id` in the collection store `documents` unless the `_id` is
    taken; whether it was stored.

    mongomock sweeps expired documents, looks the `_id` up under the store's reader lock and
    stores under its writer lock; one writer lock for both is the same without threads and lets
    no other insert in between. The lock's context managers cost more than the rest together.
    """
    # Where the sweep fails (mongomock cannot delete an expired document whose `_id` it stored
    # converted), it fails here as in mongomock's lookup: after the `_id` is set, nothing stored.
    documents._remove_expired_documents()
    lock = documents._rwlock
    lock._writer_acquire()
    try:
        if doc_id in documents._documents:
            return False
        documents._documents[doc_id] = stored
        return True
    finally:
        lock._writer_release()


# Finding and projecting ----------------------------------------------------------------------


def _matching_document(self: Any, filter_: dict[str, Any]) -> Any:
    """The one document `filter_` (which pins `_id`) matches, found as mongomock finds it.

    A filter of `_id` alone is looked up as store._enable_embedded_id_lookups does (one expiry
    sweep, one dict lookup), and a document whose `_id` has the very type and value asked for
    certainly matches. Any other filter goes, after mongomock's datetime walk, through the
    collection's own `_iter_documents` (mongomock-motor's wrapper and our `_id` lookup), so
    expiry and matching are exactly mongomock's.
    """
    if len(filter_) == 1:
        wanted = filter_["_id"]
        documents = self._store
        documents._remove_expired_documents()
        document = documents._documents.get(wanted)
        if document is None:
            return None
        found = document.get("_id", _MISSING)
        if type(found) is type(wanted) and found == wanted:
            return document
        spec = filter_  # e.g. 1 asked for, 1.0 stored: let mongomock's matching decide
    else:
        spec = _stored_copy(filter_)
    return next(iter(self._iter_documents(spec)), None)


def _projection_plan(projection: Any) -> Any:
    """How mongomock would project with `projection`, or _FALLBACK for the rest.

    Handled: no projection, `{}`, and inclusions of top-level fields (value 1 or True) with an
    optional `_id` given as an int or a bool. Exclusions, dotted fields, operators and lists
    are left to mongomock.
    """
    if projection is None:
        return None
    if type(projection) is not dict:
        return _FALLBACK
    if not projection:
        return None  # PyMongo 4: an empty projection returns the whole document
    included = []
    for key, value in projection.items():
        if type(key) is not str:
            return _FALLBACK
        if key == "_id":
            if type(value) not in (int, bool):
                return _FALLBACK
            continue
        if "." in key or key.startswith("$") or not (
                value is True or (type(value) is int and value == 1)):
            return _FALLBACK
        included.append(key)
    return frozenset(included), projection.get("_id", 1)


def _project(self: Any, document: dict[str, Any], projection: Any, plan: Any
             ) -> dict[str, Any]:
    """What mongomock's cursor returns for `document` under `projection` (see `_projection_plan`).

    Copies go through mongomock's own `_copy_field` and tz-aware walk. Like mongomock's
    `_copy_only_fields`, this moves (or adds) `_id` to the end of the caller's projection dict.
    """
    copy_field = mongomock_collection._copy_field
    if plan is None:
        projected = copy_field(document, dict)
    else:
        included, id_value = plan
        # mongomock pops `_id` from the projection and puts it back last; callers see that.
        projection["_id"] = projection.pop("_id", 1)
        if not included:
            projected = {} if id_value == 1 else copy_field(document, dict)
        else:
            # Fields come in the document's order, not the projection's.
            projected = {key: copy_field(value, dict) for key, value in document.items()
                         if key in included}
        if id_value == 0:
            projected.pop("_id", None)
        elif "_id" in document:
            projected["_id"] = document["_id"]  # last, as mongomock adds it
    if self.codec_options.tz_aware:
        projected = mongomock_helpers.make_datetime_timezone_aware_in_document(projected)
    return projected


# Updating ------------------------------------------------------------------------------------


def _stored_copy(value: Any) -> Any:
    """`value` as mongomock's `patch_datetime_awareness_in_document` returns it, for plain values.

    Dicts and lists are rebuilt, datetimes converted (see `_stored_datetime`), other scalars
    kept. Anything else (tuples, OrderedDicts, Timestamps, BSON wrapper types) raises
    _Unsupported: the walk treats those differently, or with side effects (a zero Timestamp
    becomes "now").
    """
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is dict:
        return {k: v if type(v) in _SCALARS else _stored_copy(v) for k, v in value.items()}
    if kind is list:
        return [v if type(v) in _SCALARS else _stored_copy(v) for v in value]
    if kind is datetime:
        return _stored_datetime(value)
    raise _Unsupported


def _check_plain(value: Any) -> None:
    """Raise _Unsupported where `_stored_copy` would, without building the copy."""
    kind = type(value)
    if kind in _SCALARS:
        return
    if kind is dict:
        for item in value.values():
            if type(item) not in _SCALARS:
                _check_plain(item)
    elif kind is list:
        for item in value:
            if type(item) not in _SCALARS:
                _check_plain(item)
    elif kind is datetime:
        _stored_datetime(value)
    else:
        raise _Unsupported


def _stored_datetime(value: datetime) -> datetime:
    """A datetime as mongomock 4.3 stores it: naive UTC, microseconds cut to milliseconds.

    The formula is mongomock's own (helpers.patch_datetime_awareness_in_document), including
    that the milliseconds are taken before the UTC offset is subtracted. Time zones other than
    the standard ones might fail or vary in `utcoffset`, so they fall back.
    """
    zone = value.tzinfo
    mongo_us = (value.microsecond // 1000) * 1000
    if zone is None:
        return value.replace(microsecond=mongo_us)
    if type(zone) not in _SAFE_TZ:
        raise _Unsupported
    return (value - value.utcoffset()).replace(tzinfo=None, microsecond=mongo_us)


def _plan_update(self: Any, filter_: Any, update: Any, need_change: bool) -> Any:
    """Check that `update` on the document `filter_` matches can be applied here exactly.

    Returns (document, actions, certain_change) or _FALLBACK (see `_plan_actions`). Nothing
    is changed yet, so a fallback leaves mongomock a clean start.
    """
    if type(filter_) is not dict or type(update) is not dict or not update:
        return _FALLBACK
    if type(filter_.get("_id")) not in _ID_TYPES:
        return _FALLBACK
    for operator, fields in update.items():
        if operator not in _OPERATORS or type(fields) is not dict or not fields:
            return _FALLBACK
    # mongomock re-checks every unique index after an update and rolls back on a clash; with
    # none besides `_id` (which no supported path can change) there is nothing to check.
    if _has_unique_index(self._store):
        return _FALLBACK
    try:
        document = _matching_document(self, filter_)
        if type(document) not in _DICTS:
            return _FALLBACK  # missing: an upsert would insert
        return _plan_actions(filter_, update, document, need_change)
    except Exception:
        # _Unsupported, or an input mongomock fails on (a datetime out of range once converted,
        # a filter it refuses, deep recursion): its own code fails the same way, at its own
        # moment (for find_one_and_update, after it has read the pre-image).
        return _FALLBACK


def _has_unique_index(documents: Any) -> bool:
    """Whether the collection store `documents` has a unique index besides `_id`'s.

    mongomock keeps created indexes in `indexes` (the `_id` index is implicit, never there) and
    reads it on every write, so this is read on every call too: an index created later counts.
    """
    return any(index.get("unique") for index in documents.indexes.values())


def _plan_actions(filter_: dict[str, Any], update: dict[str, Any], document: dict[str, Any],
                  need_change: bool) -> Any:
    """(document, actions, certain_change) for `update` on `document`, or raise _Unsupported.

    Each value is first put in stored form, as mongomock's walk over the whole update does.
    `actions` are (applier, path parts, parent or None, payload) in mongomock's order:
    operators in the update's order, fields in each operator's order. The parent is the
    existing embedded document holding the field (None: created when applied).
    `certain_change` is only worked out for `$set` when `need_change` is set.
    """
    paths: set[str] = set()
    dotted: list[tuple[str, ...]] = []
    actions: list[tuple[Any, tuple[str, ...], Any, Any]] = []
    certain_change = False
    set_values: list[Any] = []
    for operator, fields in update.items():
        if operator == "$setOnInsert":
            _check_plain(fields)  # the document exists: mongomock only walks these values
            continue
        planner = _PLANNERS[operator]
        applier = _APPLIERS[operator]
        array_operator = operator in _ARRAY_OPERATORS
        for path, value in fields.items():
            if type(path) is not str or path in paths:
                raise _Unsupported  # two operators on one field: mongomock applies both
            paths.add(path)
            parts = _path_parts(path)
            if not parts:
                raise _Unsupported
            if len(parts) == 1:
                parent = document
            else:
                dotted.append(parts)
                if len(parts) == 2:  # the common case, inline
                    parent = document.get(parts[0], _MISSING)
                    if parent is _MISSING:
                        parent = None
                    elif type(parent) not in _DICTS:
                        raise _Unsupported
                else:
                    parent = _existing_parent(document, parts)
            if array_operator and parts[0] in filter_:
                # mongomock follows the filter alongside array paths (for "$"); a filter field
                # named like the path could change where it looks.
                raise _Unsupported
            old = _MISSING if parent is None else parent.get(parts[-1], _MISSING)
            if type(value) not in _SCALARS:
                value = _stored_copy(value)
            if operator == "$set":  # the most common operator, planned inline
                set_values.append(value)
                if need_change and not certain_change and (
                        old is _MISSING or _unequal(old, value)):
                    certain_change = True
                actions.append((applier, parts, parent, value))
                continue
            payload, changes = planner(old, value)
            if changes:
                certain_change = True
            if parent is None and operator == "$unset":
                # The parent is missing, or created by an earlier field of this update and so
                # without this one: mongomock's $unset does nothing either way.
                continue
            actions.append((applier, parts, parent, payload))
    for parts in dotted:
        # A field and its parent in one update: mongomock applies both in turn, MongoDB refuses.
        if len(parts) == 2:
            if parts[0] in paths:
                raise _Unsupported
        else:
            for end in range(1, len(parts)):
                if ".".join(parts[:end]) in paths:
                    raise _Unsupported
    if set_values:
        # mongomock BSON-encodes every `$set` value before storing it; encoding them together
        # fails exactly when one of them does (then mongomock raises, part-way through).
        try:
            BSON.encode({"": set_values}, check_keys=False)
        except Exception as exc:
            raise _Unsupported from exc
    return document, actions, certain_change


# Updates repeat the same few paths, and splitting and checking them was a fair share of the
# work; the bound keeps paths built from data from growing the memo without end.
@functools.lru_cache(maxsize=4096)
def _path_parts(path: str) -> tuple[str, ...]:
    """`path` split at its dots, or () when the fast paths do not handle it (memoised).

    "$" anywhere makes mongomock use positional matching for the whole operator; an empty part,
    a NUL or a path into `_id` take code paths (or errors) not reproduced here.
    """
    parts = tuple(path.split("."))
    if "$" in path or "\0" in path or "" in parts or parts[0] == "_id":
        return ()
    return parts


def _existing_parent(document: dict[str, Any], parts: tuple[str, ...]) -> Any:
    """The embedded document holding `parts`, or None when a parent is missing.

    A missing parent is fine: mongomock creates it as `{}`, and no other field of the update
    can be on its path (parent and child fields in one update fall back). A parent that is not
    a document is not: lists take index paths, scalars make mongomock skip the field or fail.
    """
    node = document
    for part in parts[:-1]:
        node = node.get(part, _MISSING)
        if node is _MISSING:
            return None
        if type(node) not in _DICTS:
            raise _Unsupported
    return node


def _unequal(old: Any, new: Any) -> bool:
    """Whether storing `new` over `old` certainly changes the document for mongomock.

    mongomock compares the updated document with a deep copy of the old one; for atoms the copy
    is the same object, so the comparison is `is`, then `==`, as dict comparison does. An atom,
    a dict and a list never equal one another. Two dicts or two lists are left uncertain.
    """
    old_kind, new_kind = type(old), type(new)
    if old_kind in _ATOMS and new_kind in _ATOMS:
        return not (old is new or old == new)
    return old_kind is not new_kind and old_kind in _KNOWN_KINDS and new_kind in _KNOWN_KINDS


def _plan_set(old: Any, value: Any) -> tuple[Any, bool]:
    return value, old is _MISSING or _unequal(old, value)


def _plan_unset(old: Any, value: Any) -> tuple[Any, bool]:
    return None, old is not _MISSING


def _plan_inc(old: Any, value: Any) -> tuple[Any, bool]:
    # mongomock stores `doc.get(field, 0) + value`; other types may raise after earlier steps.
    if type(value) not in _NUMBERS:
        raise _Unsupported
    if old is _MISSING:
        return value, True
    if type(old) not in _NUMBERS:
        raise _Unsupported
    return value, _unequal(old, old + value)


def _plan_extreme(pick: Any) -> Any:
    """The planner of $min (`pick` = min) or $max (`pick` = max)."""

    def plan(old: Any, value: Any) -> tuple[Any, bool]:
        # mongomock stores `pick(doc.get(field, value), value)`: Python's comparison, which for
        # mixed kinds raises (or, for None, differs from MongoDB's type order).
        kind = type(value)
        if kind is datetime:
            if old is _MISSING:
                return value, True
            if type(old) is not datetime or old.tzinfo is not None:
                raise _Unsupported
        elif kind in _NUMBERS:
            if old is _MISSING:
                return value, True
            if type(old) not in _NUMBERS:
                raise _Unsupported
        else:
            raise _Unsupported
        return value, _unequal(old, pick(old, value))

    return plan


def _plan_push(old: Any, value: Any) -> tuple[Any, bool]:
    if old is not _MISSING and type(old) is not list:
        raise _Unsupported  # mongomock raises part-way through the update
    length = 0 if old is _MISSING else len(old)
    if type(value) is dict and "$each" in value:
        each = value["$each"]
        if not value.keys() <= _PUSH_MODIFIERS or type(each) is not list:
            raise _Unsupported  # $position, $sort and unknown modifiers
        cut = value.get("$slice")
        if "$slice" in value and type(cut) is not int:
            raise _Unsupported  # None or a float: mongomock raises part-way
        total = length + len(each)
        if cut is None:
            new_length = total
        elif cut < 0:
            new_length = min(total, -cut)
        else:
            new_length = min(total, cut)
        # Same length could still mean a change (a full, sliced list); then mongomock decides.
        return (each, cut), old is _MISSING or new_length != length
    return ([value], None), True


def _plan_add_to_set(old: Any, value: Any) -> tuple[Any, bool]:
    if old is not _MISSING and type(old) is not list:
        raise _Unsupported
    present = [] if old is _MISSING else old
    if type(value) is dict and "$each" in value:
        each = value["$each"]
        if type(each) is not list:
            raise _Unsupported
        candidates = each
    else:
        candidates = [value]
    try:
        # As mongomock: each candidate is checked against the stored list only, so duplicates
        # within `$each` are all added (MongoDB would add one). Other modifiers are ignored.
        added = any(item not in present for item in candidates)
    except Exception as exc:  # a stored value whose comparison raises: mongomock's problem
        raise _Unsupported from exc
    return candidates, old is _MISSING or added


# The appliers read the field again and compute its new value when they store it, as
# mongomock's updaters do, so that a concurrent writer (mongomock takes no lock for this
# either) has no wider window than with mongomock's own code.


def _assign(node: dict[str, Any], leaf: str, value: Any) -> None:
    """$set: store the value."""
    node[leaf] = value


def _increment(node: dict[str, Any], leaf: str, value: Any) -> None:
    """$inc, as mongomock's `_inc_updater`."""
    node[leaf] = node.get(leaf, 0) + value


def _minimum(node: dict[str, Any], leaf: str, value: Any) -> None:
    """$min, as mongomock's `_min_updater`."""
    node[leaf] = min(node.get(leaf, value), value)


def _maximum(node: dict[str, Any], leaf: str, value: Any) -> None:
    """$max, as mongomock's `_max_updater`."""
    node[leaf] = max(node.get(leaf, value), value)


def _unset(node: dict[str, Any], leaf: str, _: Any) -> None:
    """$unset: remove the field."""
    node.pop(leaf, None)


def _push(node: dict[str, Any], leaf: str, payload: Any) -> None:
    """$push: extend the stored list in place, then slice, as mongomock does."""
    if leaf not in node:
        node[leaf] = []
    each, cut = payload
    results = node[leaf]
    results += each
    if cut is not None:
        if cut < 0:
            results = results[cut:]
        elif cut == 0:
            results = []
        else:
            results = results[:cut]
    node[leaf] = results


def _add_to_set(node: dict[str, Any], leaf: str, candidates: list[Any]) -> None:
    """$addToSet: create the list if missing, then add the candidates not already in it."""
    if leaf not in node:
        node[leaf] = []
    present = node[leaf]
    present += [item for item in candidates if item not in present]


#: Per operator: (old value, value in stored form) -> (payload for the applier, whether the
#: document certainly changes).
_PLANNERS = {
    "$set": _plan_set,
    "$unset": _plan_unset,
    "$inc": _plan_inc,
    "$min": _plan_extreme(min),
    "$max": _plan_extreme(max),
    "$push": _plan_push,
    "$addToSet": _plan_add_to_set,
}

#: Per operator: how a planned action changes its embedded document (the tests replace one to
#: prove that the differential test notices).
_APPLIERS = {
    "$set": _assign,
    "$unset": _unset,
    "$inc": _increment,
    "$min": _minimum,
    "$max": _maximum,
    "$push": _push,
    "$addToSet": _add_to_set,
}


def _apply(document: dict[str, Any],
           actions: list[tuple[Any, tuple[str, ...], Any, Any]]) -> None:
    """Change `document` in place, action by action, creating missing parents as `{}`.

    mongomock, too, edits the stored document in place without its store lock (that lock only
    guards the collection's dict of documents, whose shape this never changes).
    """
    for applier, parts, parent, payload in actions:
        if parent is None:
            parent = document
            for part in parts[:-1]:
                parent = parent.setdefault(part, {})
        applier(parent, parts[-1], payload)
