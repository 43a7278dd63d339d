"""`POST /ingest/errors` (spec §4.1): the one asynchronous ingest endpoint.

The endpoint validates, applies the privacy gate and hands the job to the queue
(`tasks.queue.submit_error`); a worker does the rest (tasks/errors.py). It answers exactly
`{"ok": true}`, for a kept error and for one the privacy rules drop alike. When the job cannot be
kept it answers 503 with Retry-After rather than acknowledge an error that would be lost: on the
embedded default when the in-process queue is full, with REDIS_URL when MongoDB cannot take the
job into the outbox (a Redis that is down only delays it; see tasks/outbox.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from handlers.ingest_api import ingest_route
from tasks.queue import submit_error

if TYPE_CHECKING:
    from handlers.deps import Deps


async def _error(deps: Deps, site: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    """Queue a JavaScript or PHP error for grouping."""
    await submit_error(deps.queue, deps.intake, site, body)
    return {"ok": True}


default_handlers = [ingest_route(r"/ingest/errors", "error", "ErrorIngest", _error)]
