"""The dashboard data API: visitors, errors, leads, recordings with replay, daily charts.

Every route is under /api/v1/sites/{siteId}/ and needs a dashboard token. Members of the site's
organization may read (viewers included); changes need the owner or admin role. A site of
another organization answers 404, as if it did not exist. Restricted visitors are hidden.
"""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

from derived import conversion_impact, funnel_reports
from derived.views import charts, overview, paging
from derived.views import errors as error_views
from derived.views import leads as lead_views
from derived.views import recordings as recording_views
from derived.views import sessions as session_views
from derived.views import visitors as visitor_views
from documents import error_records, recordings, visitors
from handlers.site_api import (
    CLIENT_ID,
    PLUGIN_DOWNLOAD_PATH,
    SITE_ID,
    UUID,
    SiteDataHandler,
    plugin_archive,
)
from privacy.exclusion import page_matcher
from privacy.rectification import rectify_lead
from realtime.recent import recent_events


class VisitorsHandler(SiteDataHandler):
    """GET .../visitors?q=&country=&device=&loggedIn=&hasLead=&hasError=&firstSeenFrom=&
    firstSeenTo=&lastSeenFrom=&lastSeenTo=&segment=&cursor=&limit=: visitors by last seen,
    newest first, searched and filtered."""

    async def get(self, site_id: str) -> None:
        site = await self.readable_site(site_id)
        cursor, limit = self.page_arguments()
        argument = self.get_query_argument
        filters = visitor_views.VisitorFilters(
            q=argument("q", None) or None, country=argument("country", None) or None,
            device=argument("device", None) or None, logged_in=self.optional_flag("loggedIn"),
            has_lead=self.optional_flag("hasLead"), has_error=self.optional_flag("hasError"),
            first_seen_from=self.optional_day("firstSeenFrom"),
            first_seen_to=self.optional_day("firstSeenTo"),
            last_seen_from=self.optional_day("lastSeenFrom"),
            last_seen_to=self.optional_day("lastSeenTo"),
            visitors=await session_views.segment_visitors(
                self.deps.store, site, argument("segment", None) or None))
        page = await visitor_views.search_visitors(self.deps.store, site["_id"], filters,
                                                   cursor=cursor, limit=limit)
        self.write_json(page.as_dict())


class VisitorProfileHandler(SiteDataHandler):
    """GET .../visitors/{visitorId}: the profile with activity, errors, recordings, leads."""

    async def get(self, site_id: str, visitor_id: str) -> None:
        site = await self.readable_site(site_id)
        profile = await visitor_views.visitor_profile(self.deps.store, site["_id"], visitor_id)
        self.write_json(profile)


class ErrorsHandler(SiteDataHandler):
    """GET .../errors?status=&cursor=&limit=: error aggregates by last seen, newest first."""

    async def get(self, site_id: str) -> None:
        site = await self.readable_site(site_id)
        cursor, limit = self.page_arguments()
        page = await error_views.list_errors(self.deps.store, site["_id"],
                                             status=self.get_query_argument("status", None),
                                             cursor=cursor, limit=limit)
        self.write_json(page.as_dict())


class ErrorTrendsHandler(SiteDataHandler):
    """GET .../error-trends?from=&to=&status=&source=&page=&sort=&limit=: the errors that
    occurred in a date range, with occurrences, visitors affected, a per-day trend and the
    revenue at risk (derived/conversion_impact.py)."""

    async def get(self, site_id: str) -> None:
        site = await self.readable_site(site_id)
        first, last = self.day_range(site)
        impacts = await conversion_impact.error_impacts(
            self.deps.store, site, first, last, self.deps.reports.limited())
        ranked = await error_views.ranked_errors(
            self.deps.store, site["_id"], first=first, last=last,
            status=self.get_query_argument("status", None) or None,
            source=self.get_query_argument("source", None) or None,
            page=self.get_query_argument("page", None) or None,
            sort=self.get_query_argument("sort", None) or "lastSeen",
            limit=min(paging.page_limit(self.get_query_argument("limit", None)),
                      error_views.MAX_RANKED_ERRORS), impacts=impacts)
        self.write_json({**ranked, "rule": conversion_impact.RULE})


class ErrorBreakdownHandler(SiteDataHandler):
    """GET .../errors/{errorId}/breakdown?from=&to=: per day, visitors, pages, browsers,
    systems, devices, the latest occurrences and the revenue at risk of one error in a date
    range."""

    async def get(self, site_id: str, error_id: str) -> None:
        site = await self.readable_site(site_id)
        first, last = self.day_range(site)
        impacts = await conversion_impact.error_impacts(
            self.deps.store, site, first, last, self.deps.reports.limited())
        breakdown = await error_views.error_breakdown(self.deps.store, site["_id"], error_id,
                                                      first=first, last=last, impacts=impacts)
        self.write_json(breakdown)


class ErrorReplaysHandler(SiteDataHandler):
    """GET .../errors/{errorId}/replays?from=&to=: the error's latest occurrences that a
    recording shows, each with the recording to open at that moment."""

    async def get(self, site_id: str, error_id: str) -> None:
        site = await self.readable_site(site_id)
        first, last = self.day_range(site)
        replays = await error_views.error_replays(self.deps.store, site["_id"], error_id,
                                                  first=first, last=last)
        self.write_json(replays)


class ErrorHandler(SiteDataHandler):
    """GET .../errors/{errorId}: the aggregate; PATCH {status}: open, resolved or ignored."""

    async def get(self, site_id: str, error_id: str) -> None:
        site = await self.readable_site(site_id)
        error = await error_views.find_error(self.deps.store, site["_id"], error_id)
        self.write_json(error_views.error_detail(error))

    async def patch(self, site_id: str, error_id: str) -> None:
        site = await self.admin_site(site_id)  # before the body: strangers learn nothing
        body = self.validated_body("ErrorStatusChange")
        after = await error_records.change_status(self.deps.store, site, error_id, body["status"],
                                                  actor_user_id=self.user.id,
                                                  account_id=self.user.account_id)
        self.write_json(error_views.error_detail(after))


class LeadsHandler(SiteDataHandler):
    """GET .../leads?cursor=&limit=: leads, newest first."""

    async def get(self, site_id: str) -> None:
        site = await self.readable_site(site_id)
        cursor, limit = self.page_arguments()
        page = await lead_views.list_leads(self.deps.store, site["_id"], cursor=cursor,
                                           limit=limit)
        self.write_json(page.as_dict())


class LeadHandler(SiteDataHandler):
    """PATCH .../leads/{leadId}: rectification (GDPR Art. 16) of name, e-mail, phone, fields.

    Logged as a data-subject request and audited with the names of the changed fields only.
    """

    async def patch(self, site_id: str, lead_id: str) -> None:
        site = await self.admin_site(site_id)
        body = self.validated_body("LeadRectification")
        done = await rectify_lead(self.deps.store, site, lead_id, body,
                                  digester=self.deps.subject_digester, actor_user_id=self.user.id,
                                  account_id=self.user.account_id)
        self.write_json({**lead_views.lead_view(done.lead), "changedFields": done.fields,
                         "requestId": done.request_id})


class RecordingsHandler(SiteDataHandler):
    """GET .../recordings?visitorId=&from=&to=&minDuration=&maxDuration=&page=&country=&
    device=&has=&source=&funnel=&stoppedAt=&error=&segment=&cursor=&limit=: recordings, newest
    first, with what happened in each."""

    async def sessions(self, site: dict[str, Any]) -> tuple[str, ...] | None:
        """The sessions a `source`, `funnel` + `stoppedAt`, `error` or `segment` filter leaves
        (all of those given); None without one."""
        source = self.get_query_argument("source", None) or None
        funnel_id = self.get_query_argument("funnel", None) or None
        error_id = self.get_query_argument("error", None) or None
        segment_id = self.get_query_argument("segment", None) or None
        if source is None and funnel_id is None and error_id is None and segment_id is None:
            return None
        first, last = self.day_range(site)
        found: tuple[str, ...] | None = None
        if source is not None or funnel_id is not None:
            step = self.optional_number("stoppedAt")
            found = await funnel_reports.recording_sessions(
                self.deps.store, site["_id"], first, last, source=source, funnel_id=funnel_id,
                step=int(step) if step is not None else None, page_matches=page_matcher(),
                offload=self.deps.reports.limited())
        if error_id is not None:
            hit = await recording_views.sessions_hit_by(self.deps.store, site["_id"], error_id,
                                                        first, last)
            found = hit if found is None else tuple(s for s in found if s in set(hit))
        if segment_id is not None:
            chosen = await session_views.segment_sessions(self.deps.store, site, segment_id,
                                                          first, last)
            found = chosen if found is None else tuple(s for s in found if s in set(chosen or ()))
        return found

    async def get(self, site_id: str) -> None:
        site = await self.readable_site(site_id)
        cursor, limit = self.page_arguments()
        argument = self.get_query_argument
        filters = recording_views.RecordingFilters(
            first=self.optional_day("from"), last=self.optional_day("to"),
            min_seconds=self.optional_number("minDuration"),
            max_seconds=self.optional_number("maxDuration"),
            page=argument("page", None) or None, country=argument("country", None) or None,
            device=argument("device", None) or None,
            marks=tuple(mark for mark in (argument("has", None) or "").split(",") if mark),
            visitor_id=argument("visitorId", None), sessions=await self.sessions(site))
        page = await recording_views.search_recordings(self.deps.store, site["_id"], filters,
                                                       cursor=cursor, limit=limit)
        self.write_json(page.as_dict())


class RecordingTimelineHandler(SiteDataHandler):
    """GET .../recordings/{recordingId}/timeline: errors, rage and dead clicks, page changes
    and leads during the recording, with their times, for the replay's markers."""

    async def get(self, site_id: str, recording_id: str) -> None:
        site = await self.readable_site(site_id)
        timeline = await recording_views.recording_timeline(self.deps.store, site["_id"],
                                                            recording_id)
        self.write_json(timeline)


class RecordingSegmentsHandler(SiteDataHandler):
    """GET .../recordings/{recordingId}/segments: the replayable segments, in replay order."""

    async def get(self, site_id: str, recording_id: str) -> None:
        site = await self.readable_site(site_id)
        recording = await recording_views.replayable_recording(self.deps.store, site["_id"],
                                                               recording_id)
        segments = await recording_views.recording_segments(self.deps.store, site["_id"],
                                                            recording["_id"])
        self.write_json({"recording": recording_views.recording_summary(recording),
                                    "segments": segments})


class SegmentHandler(SiteDataHandler):
    """GET .../segments/{fileId}: one segment's stored gzip bytes, streamed, for replay.

    Motor's GridFSHandler pattern: look the file up (404 when missing), answer ETag and
    Last-Modified, 304 when the client's copy is current, else stream chunk by chunk. Segment
    files never change (the sweeper replaces a file under a new id), so id and length make a
    strong ETag. The body is the gzip file as stored (`application/gzip`), not a
    `Content-Encoding`: the dashboard inflates it with `DecompressionStream("gzip")`, and no
    proxy or client decompresses it on the way.
    """

    async def get(self, site_id: str, file_id: str) -> None:
        site = await self.readable_site(site_id)
        segment = await recording_views.replayable_segment(self.deps.store, site["_id"], file_id)
        modified: datetime = segment["uploadDate"].astimezone(UTC).replace(microsecond=0)
        self.set_header("Content-Type", "application/gzip")
        # Cached, but revalidated every time: access may be revoked or the footage erased.
        self.set_header("Cache-Control", "private, no-cache")
        self.set_header("Etag", f'"{segment["_id"]}-{segment["length"]}"')
        self.set_header("Last-Modified", modified)
        if self._client_copy_is_current(modified):
            self.set_status(304)
            self.finish()
            return
        self.set_header("Content-Length", segment["length"])
        async for chunk in recordings.stream_segment(self.deps.store, site["_id"],
                                                     segment["_id"]):
            self.write(chunk)
            await self.flush()
        self.finish()

    def _client_copy_is_current(self, modified: datetime) -> bool:
        if self.request.headers.get("If-None-Match"):
            return self.check_etag_header()
        since = self.request.headers.get("If-Modified-Since")
        if not since:
            return False
        try:
            return parsedate_to_datetime(since) >= modified
        except (TypeError, ValueError):
            return False


class InstallHandler(SiteDataHandler):
    """GET .../install: what installing the site on a shop needs (the loader snippet, the plugin
    archive and the values to enter) and whether its pageviews arrive yet."""

    async def get(self, site_id: str) -> None:
        site = await self.readable_site(site_id)
        service_url = self.deps.settings.public_url.rstrip("/")
        archive = plugin_archive()
        last_pageview = await visitors.last_pageview_seen(self.deps.store, site["_id"])
        self.write_json({
            "serviceUrl": service_url,
            "publicKey": site["publicKey"],
            "apiKeyHint": site.get("apiKeyHint"),
            "allowedOrigins": site.get("allowedOrigins", []),
            "loaderSnippet": loader_snippet(service_url, site["publicKey"]),
            "plugin": {"available": archive.is_file(), "url": PLUGIN_DOWNLOAD_PATH,
                       "bytes": archive.stat().st_size if archive.is_file() else None,
                       "build": "make plugin-zip"},
            "receiving": last_pageview is not None,
            "lastPageviewAt": last_pageview,
        })


def loader_snippet(service_url: str, public_key: str) -> str:
    """The two script tags of docs/sdk.md, ready to paste into a shop's pages."""
    return ("<script>window.svc = window.svc || function () { (svc.q = svc.q || [])"
            ".push(arguments); };</script>\n"
            f'<script async src="{service_url}/sdk/v1/loader.js?key={public_key}"></script>')


class DailyStatsHandler(SiteDataHandler):
    """GET .../stats/daily?from=&to=: pageviews and errors per UTC day, for the charts."""

    async def get(self, site_id: str) -> None:
        site = await self.readable_site(site_id)
        first, last = self.day_range(site)
        days = await charts.daily_counts(self.deps.store, site["_id"], first, last)
        self.write_json(days)


class OverviewHandler(SiteDataHandler):
    """GET .../overview?from=&to=: the period's figures against the previous period, top
    pages, top errors, pages with rage and dead clicks, countries and devices."""

    async def get(self, site_id: str) -> None:
        site = await self.readable_site(site_id)
        first, last = self.day_range(site)
        self.write_json(await overview.overview(self.deps.store, site, first, last))


class RecentEventsHandler(SiteDataHandler):
    """GET .../live/recent: the live feed's events of the past hour, for a fresh feed."""

    async def get(self, site_id: str) -> None:
        site = await self.readable_site(site_id)
        self.write_json({"events": await recent_events(self.deps.store, site["_id"])})


default_handlers = [
    (rf"/api/v1/sites/{SITE_ID}/visitors", VisitorsHandler),
    (rf"/api/v1/sites/{SITE_ID}/visitors/{CLIENT_ID}", VisitorProfileHandler),
    (rf"/api/v1/sites/{SITE_ID}/errors", ErrorsHandler),
    (rf"/api/v1/sites/{SITE_ID}/errors/{UUID}", ErrorHandler),
    (rf"/api/v1/sites/{SITE_ID}/errors/{UUID}/breakdown", ErrorBreakdownHandler),
    (rf"/api/v1/sites/{SITE_ID}/errors/{UUID}/replays", ErrorReplaysHandler),
    (rf"/api/v1/sites/{SITE_ID}/error-trends", ErrorTrendsHandler),
    (rf"/api/v1/sites/{SITE_ID}/leads", LeadsHandler),
    (rf"/api/v1/sites/{SITE_ID}/leads/{CLIENT_ID}", LeadHandler),
    (rf"/api/v1/sites/{SITE_ID}/recordings", RecordingsHandler),
    (rf"/api/v1/sites/{SITE_ID}/recordings/{UUID}/segments", RecordingSegmentsHandler),
    (rf"/api/v1/sites/{SITE_ID}/recordings/{UUID}/timeline", RecordingTimelineHandler),
    (rf"/api/v1/sites/{SITE_ID}/segments/{UUID}", SegmentHandler),
    (rf"/api/v1/sites/{SITE_ID}/stats/daily", DailyStatsHandler),
    (rf"/api/v1/sites/{SITE_ID}/overview", OverviewHandler),
    (rf"/api/v1/sites/{SITE_ID}/install", InstallHandler),
    (rf"/api/v1/sites/{SITE_ID}/live/recent", RecentEventsHandler),
]
