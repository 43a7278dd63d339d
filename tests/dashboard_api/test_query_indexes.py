"""Each query shape the issue-21 dashboard reads issue is served by a declared index.

A shape is the collection, the fields it matches by equality (any order, they lead the index)
and then the one field it ranges over or sorts by. `_id` lookups need no declared index.
"""

from __future__ import annotations

import pytest

from derived import daily_figures, derivation, store_setup, visits
from documents import commerce, error_records, funnels, heatmaps, segments

DECLARED = store_setup.declared_indexes()

SHAPES = [
    # ranked_errors: occurrences in a date range, and the same filtered by a page prefix.
    (error_records.OCCURRENCES, {"siteId"}, "occurredAt"),
    (error_records.OCCURRENCES, {"siteId"}, "page"),
    # error_breakdown: one error's occurrences in a range, latest first.
    (error_records.OCCURRENCES, {"siteId", "errorId"}, "occurredAt"),
    # restricted visitors, left out of every list; and the privacy holds ($or of the two).
    ("visitors", {"siteId", "restricted"}, None),
    ("visitors", {"siteId", "objected"}, None),
    # pageviews_arriving: the newest visitor with a pageview.
    ("visitors", {"siteId"}, "lastSeen"),
    # recordings searched (insights.search_recordings), all or one visitor's, newest first;
    # country, device, marks and duration are matched on the recordings this range reads.
    ("recordings", {"siteId"}, "startedAt"),
    # ...one visitor's, and the recordings running at a moment (recordings.recordings_at): for
    # an error's replay, and to count an arriving error, click or lead (recordings.add_marks).
    ("recordings", {"siteId", "visitorId"}, "startedAt"),
    # a recording's timeline, and the backfill of old recordings' marks
    # (recordings.backfill_facts): the visitors' errors, clicks and leads in their windows.
    (error_records.OCCURRENCES, {"siteId", "visitorId"}, "occurredAt"),
    ("interaction_buckets", {"siteId", "visitorId"}, "firstAt"),
    ("leads", {"siteId", "visitorId"}, "createdAt"),
    # visitors searched, all or of one country or device, by last seen.
    ("visitors", {"siteId", "location.country"}, "lastSeen"),
    ("visitors", {"siteId", "device.type"}, "lastSeen"),
    # the overview and the daily chart: a site's pages over days (its days are read by
    # `_id`), and the top errors of a range (the occurrences' shape above); the leads list.
    (daily_figures.PAGE_DAYS, {"siteId"}, "day"),
    ("leads", {"siteId"}, "createdAt"),
    # a visitor's active days: the day before and after a new one, and their share.
    (daily_figures.VISITOR_DAYS, {"siteId", "visitorId"}, "day"),
    # the errors list: a range's error days; a visitor's days with one error, as above.
    (daily_figures.ERROR_DAYS, {"siteId"}, "day"),
    (daily_figures.ERROR_VISITOR_DAYS, {"siteId", "visitorId", "errorId"}, "day"),
    # requests: a subject's requests (erasure forgets the id; a new request checks for one).
    ("dsr_requests", {"siteId", "subjectDigest"}, None),
    # the request log, newest first.
    ("dsr_requests", {"organizationId"}, "receivedAt"),
    # surveys (issue 20): a site's surveys newest first, the loader's active ones, one
    # survey's answers newest first (results and CSV), the recording around an answer.
    ("surveys", {"siteId"}, "createdAt"),
    ("surveys", {"siteId", "active"}, "createdAt"),
    ("survey_responses", {"siteId", "surveyId"}, "answeredAt"),
    # the per-site survey counter the cap is kept by.
    ("survey_counters", {"siteId"}, None),
    ("recordings", {"siteId", "visitorId"}, "startedAt"),
    # heatmaps: one page's counts for a width class and kind over days (issue 22).
    (heatmaps.COUNTS, {"siteId", "page", "width", "kind"}, "day"),
    # heatmaps: a site's pages over days.
    (heatmaps.COUNTS, {"siteId"}, "day"),
    # heatmaps: the images of a page, and those rendered from given recordings (erasure).
    (f"{heatmaps.BUCKET}.files", {"metadata.siteId", "metadata.pageUrl"}, None),
    (f"{heatmaps.BUCKET}.files", {"metadata.siteId"}, "metadata.sourceRecordingIds"),
    # heatmaps: the newest image of a page at a width class.
    (f"{heatmaps.BUCKET}.files", {"metadata.siteId", "metadata.pageUrl", "metadata.width"},
     "uploadDate"),
    # the render job: a site's recent recordings by status.
    ("recordings", {"siteId", "status"}, "lastActivityAt"),
    # the heatmap renderer claims the oldest request whose lease ran out.
    (heatmaps.RENDERS, set(), "leaseUntil"),
    # the idle sweep ends recordings idle past the threshold, across sites.
    ("recordings", {"status"}, "lastActivityAt"),
    # the derivation (issue 30): a site's facts in the order stored, a visitor's pending
    # facts (erasure, restriction, export), and the oldest fact of all (the lag).
    (derivation.COLLECTION, {"siteId"}, "recordedAt"),
    (derivation.COLLECTION, {"siteId", "visitorId"}, None),
    (derivation.COLLECTION, set(), "recordedAt"),
    # issue 31: a range's visits (funnels, revenue at risk, the source filter) and a visitor's
    # (erasure, export, their share); the overview's session figures over days.
    (visits.COLLECTION, {"siteId"}, "startedAt"),
    (visits.COLLECTION, {"siteId", "visitorId"}, None),
    # ...and a visitor's last visit before a moment (a journey record without a session).
    (visits.COLLECTION, {"siteId", "visitorId"}, "startedAt"),
    # ...a range's session figures, one dimension at a time.
    (daily_figures.SESSION_DAYS, {"siteId", "dimension"}, "day"),
    # ...a range's paid orders (commerce.paid_orders), a site's funnels.
    (commerce.ORDERS, {"siteId"}, "paidAt"),
    (funnels.COLLECTION, {"siteId"}, "createdAt"),
    # the orders list (issue 41 point 1): a range of placings, all or of one status or currency
    # (the value filter and sort read one currency's); a range of payments (the shape above;
    # status and currency are matched on the orders it reads); a visitor's newest orders (the
    # profile); an order's visit, by its session (`_id`) or the visitor's last visit before
    # it (the visits' shape above).
    (commerce.ORDERS, {"siteId"}, "placedAt"),
    (commerce.ORDERS, {"siteId", "status"}, "placedAt"),
    (commerce.ORDERS, {"siteId", "currency"}, "placedAt"),
    (commerce.ORDERS, {"siteId", "visitorId"}, None),
    # sessions by outcome (issue 41 point 5): a range of a site's visits by one filter key
    # (entry, exit, page, source, UTM, device, country, error, frustration, paid), newest
    # first, the other keys and the value range matched on the visits it reads; unfiltered or
    # converted=false alone on (siteId, startedAt) above. A segment's recordings (its session
    # ids in a range) and visitors (the newest visits of any day) read the same shapes; a
    # segment by its `_id`, a site's segments by name.
    (visits.COLLECTION, {"siteId", "filterKeys"}, "startedAt"),
    (segments.COLLECTION, {"siteId"}, "nameKey"),
]


def _served(collection: str, equal: set[str], then: str | None) -> bool:
    for index in DECLARED:
        if index.collection != collection:
            continue
        fields = [field for field, _ in index.keys]
        if set(fields[:len(equal)]) != equal:
            continue
        if then is None or (len(fields) > len(equal) and fields[len(equal)] == then):
            return True
    return False


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}:{'+'.join(sorted(s[1]))}:{s[2]}")
def test_the_query_shape_has_a_declared_index(shape):
    assert _served(*shape), f"no declared index serves {shape}"
