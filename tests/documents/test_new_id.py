"""`new_id` builds UUID4 text itself (for speed); it must be what `str(uuid.uuid4())` gives."""

from __future__ import annotations

import uuid

from documents.accounts import new_id


def test_new_ids_are_distinct_canonical_version_4_uuids():
    ids = [new_id() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    for text in ids:
        parsed = uuid.UUID(text)
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
        assert str(parsed) == text  # lower-case hex, dashes where uuid4's text has them
