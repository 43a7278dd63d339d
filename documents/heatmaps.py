"""Heatmap background images, stored in GridFS with the recordings they were rendered from.

Keeping the source recording ids on each image is what lets erasure find and delete the
images rendered from a visitor's recordings (spec §4.3 effect 6).
"""

from __future__ import annotations

import uuid
from typing import Any

from documents.store import ASCENDING, Index, Store

BUCKET = "heatmaps"

INDEXES = [
    Index(f"{BUCKET}.files", (("metadata.siteId", ASCENDING),
                              ("metadata.sourceRecordingIds", ASCENDING))),
    Index(f"{BUCKET}.files", (("metadata.siteId", ASCENDING), ("metadata.pageUrl", ASCENDING))),
    Index(f"{BUCKET}.chunks", (("files_id", ASCENDING), ("n", ASCENDING)), unique=True),
]


async def store_heatmap(store: Store, site_id: str, page_url: str, image: bytes,
                        source_recording_ids: list[str], *, session: Any = None) -> str:
    """Store a rendered image with the recordings it came from; returns its file id."""
    file_id = str(uuid.uuid4())
    await store.bucket(BUCKET).upload(
        file_id, f"{site_id}/heatmap-{file_id}.png", image,
        {"siteId": site_id, "pageUrl": page_url, "contentType": "image/png",
         "sourceRecordingIds": sorted(set(source_recording_ids))},
        session=session,
    )
    return file_id
