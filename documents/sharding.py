"""Where each collection would live in a sharded cluster: its intended shard key, or why it
stays unsharded (on the primary shard).

Nothing here runs against the store: a replica set needs none of it. It is the plan the
indexes and queries are kept ready for, checked by tests/documents/test_shard_keys.py: every
unique index of a sharded collection starts with its shard key (MongoDB enforces uniqueness
only per shard otherwise), and every dashboard query shape names the shard key or says here
why it may scatter. docs/operations.md ("Growing to a sharded cluster") says how to use it.

A shop's visitors' data is sharded by (siteId, visitorId), its figures by siteId: every
dashboard read is about one site, and names the key's prefix, so it goes only to the shards
holding that site; erasure is about one visitor and stays on one shard in the common case. A
big shop is split by visitor, so no site becomes one jumbo chunk.
"""

from __future__ import annotations

from dataclasses import dataclass

from documents import (
    activity,
    commerce,
    derivation,
    funnels,
    heatmaps,
    interactions,
    recordings,
    rollups,
    visits,
)


@dataclass(frozen=True)
class Placement:
    """A collection's shard key (None: unsharded) and the reason for it."""

    key: tuple[str, ...] | None
    why: str


_SITE = ("siteId",)
_BY_SITE = "read and written per site"
_VISITOR = ("siteId", "visitorId")
_BY_VISITOR = "a visitor's records, read per site or per visitor"
_SMALL = "small, read by its own keys (accounts and settings): stays on the primary shard"
_CHUNKS = "GridFS bytes, the bulk of the data: by file, as MongoDB advises for chunks"

SHARD_KEYS: dict[str, Placement] = {
    # Accounts, settings and bookkeeping: small, unsharded.
    "accounts": Placement(None, _SMALL),
    "users": Placement(None, _SMALL + "; unique e-mail"),
    "memberships": Placement(None, _SMALL),
    "organizations": Placement(None, _SMALL),
    "sites": Placement(None, _SMALL + "; unique API key hash and public key"),
    "refresh_tokens": Placement(None, _SMALL),
    "login_throttle": Placement(None, _SMALL + "; expiring"),
    "statement_nonces": Placement(None, "expiring within minutes"),
    "migrations": Placement(None, "a few claims"),
    # The retention purge's bookkeeping (documents/retention.py): a document per run, and ten
    # per site, written by the one runner.
    "retention_runs": Placement(None, "a document per purge run"),
    "retention_status": Placement(None, _SMALL),
    derivation.LEASES: Placement(None, "one lease per site"),
    "notification_channels": Placement(None, _SMALL),
    "audit_log": Placement(None, "per organization, written by hand-made actions"),
    "dsr_requests": Placement(None, "per organization, written by hand-made requests"),
    heatmaps.RENDERS: Placement(None, "a queue of a few requests at a time"),
    "error_outbox": Placement(None, "a queue, near empty when the workers keep up"),
    "failed_jobs": Placement(None, "jobs that exhausted their retries: few"),
    "segments.files": Placement(None, "one small document per segment; its bytes are chunks"),
    "heatmaps.files": Placement(None, "one small document per image; its bytes are chunks"),
    # GridFS bytes.
    "segments.chunks": Placement(("files_id", "n"), _CHUNKS),
    "heatmaps.chunks": Placement(("files_id", "n"), _CHUNKS),
    # A shop's visitors' data: one shard per visitor in the common case (the profile upsert,
    # the bucket appends, the visitor page, export and erasure); a site's queries name its
    # prefix and go to the shards holding the site.
    "visitors": Placement(_VISITOR, _BY_VISITOR),
    activity.COLLECTION: Placement(_VISITOR, _BY_VISITOR),
    interactions.COLLECTION: Placement(_VISITOR, _BY_VISITOR),
    "recordings": Placement(_VISITOR, _BY_VISITOR),
    "leads": Placement(_VISITOR, _BY_VISITOR),
    "chat_transcripts": Placement(_VISITOR, _BY_VISITOR),
    "consent_decisions": Placement(_VISITOR, _BY_VISITOR),
    "survey_responses": Placement(_VISITOR, _BY_VISITOR),
    "error_occurrences": Placement(_VISITOR, _BY_VISITOR),
    "error_sessions": Placement(_VISITOR, _BY_VISITOR),
    rollups.VISITOR_DAYS: Placement(_VISITOR, _BY_VISITOR),
    visits.COLLECTION: Placement(_VISITOR, _BY_VISITOR),
    commerce.EVENTS: Placement(_VISITOR, _BY_VISITOR),
    derivation.COLLECTION: Placement(_VISITOR, _BY_VISITOR + "; folded per site"),
    recordings.MARKS_PENDING: Placement(_VISITOR, _BY_VISITOR + "; added per site"),
    # A site's own figures and settings.
    "errors": Placement(("siteId", "fingerprint"), "one aggregate per (site, fingerprint)"),
    "surveys": Placement(_SITE, _BY_SITE),
    "survey_counters": Placement(_SITE, _BY_SITE),
    "notification_deliveries": Placement(_SITE, _BY_SITE),
    rollups.SITE_DAYS: Placement(_SITE, _BY_SITE + " (read by `_id`, which starts with it)"),
    rollups.PAGE_DAYS: Placement(_SITE, _BY_SITE),
    rollups.SESSION_DAYS: Placement(_SITE, _BY_SITE),
    funnels.COLLECTION: Placement(_SITE, _BY_SITE),
    heatmaps.COUNTS: Placement(_SITE, _BY_SITE),
    # An order's events can arrive without the visitor (a payment confirmed later), so an
    # order is found by its own key: by site, like the site's figures.
    commerce.ORDERS: Placement(_SITE, _BY_SITE + "; one per (site, order), found by `_id`"),
}

#: Query shapes that do not name their collection's shard key (its first field), and why they
#: may scatter over every shard.
SCATTERS: dict[tuple[str, frozenset[str]], str] = {
    (heatmaps.RENDERS, frozenset()): "unsharded queue",
    (derivation.COLLECTION, frozenset()): (
        "the lag gauge's one sorted read of the oldest fact, every few seconds: one index "
        "entry per shard"),
    ("recordings", frozenset({"status"})): (
        "the idle sweep across sites (recordings.end_idle_recordings), every few seconds off "
        "the request path; one index range per shard"),
}
