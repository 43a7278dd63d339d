"""Where each raw collection would live in a sharded cluster: its intended shard key, or why it
stays unsharded (on the primary shard). The derived layer's collections are placed the same way
in derived/store_setup.py, with the keys named here.

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
    account_links,
    account_mail,
    accounts,
    activity,
    alerts,
    audit,
    commerce,
    digests,
    engagement,
    error_outbox,
    error_records,
    funnels,
    heatmaps,
    ingest_drops,
    interactions,
    leads,
    migrations,
    notifications,
    recordings,
    requests,
    retention,
    segments,
    sites,
    statement_nonces,
    surveys,
    two_factor,
    visitors,
)


@dataclass(frozen=True)
class Placement:
    """A collection's shard key (None: unsharded) and the reason for it."""

    key: tuple[str, ...] | None
    why: str


SITE = ("siteId",)
BY_SITE = "read and written per site"
VISITOR = ("siteId", "visitorId")
BY_VISITOR = "a visitor's records, read per site or per visitor"
_SMALL = "small, read by its own keys (accounts and settings): stays on the primary shard"
_SEGMENTS_FILES = f"{recordings.SEGMENTS_BUCKET}.files"
_SEGMENTS_CHUNKS = f"{recordings.SEGMENTS_BUCKET}.chunks"
_HEATMAP_FILES = f"{heatmaps.BUCKET}.files"
_HEATMAP_CHUNKS = f"{heatmaps.BUCKET}.chunks"
_CHUNKS = "GridFS bytes, the bulk of the data: by file, as MongoDB advises for chunks"

SHARD_KEYS: dict[str, Placement] = {
    # Accounts, settings and bookkeeping: small, unsharded.
    accounts.ACCOUNTS: Placement(None, _SMALL),
    accounts.USERS: Placement(None, _SMALL + "; unique e-mail"),
    accounts.MEMBERSHIPS: Placement(None, _SMALL),
    accounts.ORGANIZATIONS: Placement(None, _SMALL),
    sites.COLLECTION: Placement(None, _SMALL + "; unique API key hash and public key"),
    accounts.REFRESH_TOKENS: Placement(None, _SMALL),
    accounts.LOGIN_THROTTLE: Placement(None, _SMALL + "; expiring"),
    statement_nonces.COLLECTION: Placement(None, "expiring within minutes"),
    migrations.COLLECTION: Placement(None, "a few claims"),
    # The retention purge's bookkeeping (documents/retention.py): a document per run, and ten
    # per site, written by the one runner.
    retention.RUNS: Placement(None, "a document per purge run"),
    retention.STATUS: Placement(None, _SMALL),
    notifications.CHANNELS: Placement(None, _SMALL),
    account_links.COLLECTION: Placement(None, "pending invitations and password resets, "
                                              "expiring; unique token digest"),
    account_mail.COLLECTION: Placement(None, "a log of invitation and reset mails"),
    two_factor.COLLECTION: Placement(None, _SMALL + "; one per user with two-factor"),
    two_factor.REQUIREMENTS: Placement(None, _SMALL + "; one per organization requiring it"),
    # Read across sites by the evaluator each pass: a few rules per site.
    alerts.RULES: Placement(None, _SMALL),
    alerts.EPISODES: Placement(None, "a few per rule, expiring; unique (rule, episode)"),
    alerts.MEMBERS: Placement(None, "one per member and site who changed a setting"),
    digests.DELIVERIES: Placement(None, "one per member, site and period, expiring; unique"),
    audit.COLLECTION: Placement(None, "per organization, written by hand-made actions"),
    requests.COLLECTION: Placement(None, "per organization, written by hand-made requests"),
    heatmaps.RENDERS: Placement(None, "a queue of a few requests at a time"),
    error_outbox.OUTBOX: Placement(None, "a queue, near empty when the workers keep up"),
    error_records.FAILED_JOBS: Placement(None, "jobs that exhausted their retries: few"),
    _SEGMENTS_FILES: Placement(None, "one small document per segment; its bytes are chunks"),
    _HEATMAP_FILES: Placement(None, "one small document per image; its bytes are chunks"),
    # GridFS bytes.
    _SEGMENTS_CHUNKS: Placement(("files_id", "n"), _CHUNKS),
    _HEATMAP_CHUNKS: Placement(("files_id", "n"), _CHUNKS),
    # A shop's visitors' data: one shard per visitor in the common case (the profile upsert,
    # the bucket appends, the visitor page, export and erasure); a site's queries name its
    # prefix and go to the shards holding the site.
    visitors.COLLECTION: Placement(VISITOR, BY_VISITOR),
    activity.COLLECTION: Placement(VISITOR, BY_VISITOR),
    interactions.COLLECTION: Placement(VISITOR, BY_VISITOR),
    recordings.COLLECTION: Placement(VISITOR, BY_VISITOR),
    leads.COLLECTION: Placement(VISITOR, BY_VISITOR),
    engagement.CHAT_TRANSCRIPTS: Placement(VISITOR, BY_VISITOR),
    engagement.CONSENT_DECISIONS: Placement(VISITOR, BY_VISITOR),
    engagement.SURVEY_RESPONSES: Placement(VISITOR, BY_VISITOR),
    error_records.OCCURRENCES: Placement(VISITOR, BY_VISITOR),
    error_records.SESSION_LINKS: Placement(VISITOR, BY_VISITOR),
    commerce.EVENTS: Placement(VISITOR, BY_VISITOR),
    recordings.MARKS_PENDING: Placement(VISITOR, BY_VISITOR + "; added per site"),
    # A site's own figures and settings.
    error_records.ERRORS: Placement(("siteId", "fingerprint"),
                                    "one aggregate per (site, fingerprint)"),
    surveys.COLLECTION: Placement(SITE, BY_SITE),
    surveys.COUNTERS: Placement(SITE, BY_SITE),
    notifications.DELIVERIES: Placement(SITE, BY_SITE),
    funnels.COLLECTION: Placement(SITE, BY_SITE),
    segments.COLLECTION: Placement(SITE, BY_SITE),
    heatmaps.COUNTS: Placement(SITE, BY_SITE),
    # A few per site and day, only for drops (documents/ingest_drops.py), expiring.
    ingest_drops.COLLECTION: Placement(SITE, BY_SITE),
    # An order's events can arrive without the visitor (a payment confirmed later), so an
    # order is found by its own key: by site, like the site's figures.
    commerce.ORDERS: Placement(SITE, BY_SITE + "; one per (site, order), found by `_id`"),
}

#: Query shapes that do not name their collection's shard key (its first field), and why they
#: may scatter over every shard.
SCATTERS: dict[tuple[str, frozenset[str]], str] = {
    (heatmaps.RENDERS, frozenset()): "unsharded queue",
    (recordings.COLLECTION, frozenset({"status"})): (
        "the idle sweep across sites (recordings.end_idle_recordings), every few seconds off "
        "the request path; one index range per shard"),
}
