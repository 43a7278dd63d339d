"""What only the browser path (/sdk/v1) needs: time on page and the loader's site config."""

from __future__ import annotations

from typing import Any

from derived import daily_figures, derivation
from documents import activity
from documents import sites as site_documents
from ingest.intake import Outcome, VisitorIntake
from privacy.exclusion import site_exclusion_rules


async def record_time_on_page(intake: VisitorIntake, site: dict[str, Any],
                              payload: dict[str, Any]) -> Outcome:
    """Set the duration of a stored pageview; the longest report wins."""
    decision = await intake.admit(site, "time_on_page", payload)
    if not decision.allowed:
        return Outcome.dropped(decision.reason or "unknown")
    site_id, visitor_id = site["_id"], payload["visitorId"]

    async def work(session: Any) -> bool:
        # The duration and the fact that moves it in the figures go together (issue 41 point 4).
        report = await activity.set_pageview_duration(
            intake.store, site_id, visitor_id, payload["pageviewId"], payload["duration"],
            session=session)
        await derivation.add_fact(intake.store, site_id, visitor_id,
                                  daily_figures.TIME_ON_PAGE, report.changed, session=session)
        return report.found

    if not await intake.store.transaction(work):
        # The pageview itself was dropped or not yet written; a duration alone means nothing.
        intake.count("time_on_page", "dropped", "unknown_pageview")
        return Outcome.dropped("unknown_pageview")
    intake.count("time_on_page", "stored")
    return Outcome(True, None, payload["pageviewId"])


def loader_config(site: dict[str, Any]) -> dict[str, Any]:
    """The settings the loader acts on; the server still enforces every one of them."""
    settings = {**site_documents.DEFAULT_SETTINGS, **site.get("settings", {})}
    return {
        "requireConsent": bool(settings["requireConsent"]),
        "recordings": bool(settings["recordings"]),
        "consoleCapture": bool(settings["consoleCapture"]),
        "excludedUrls": [{"pattern": rule.pattern, "scope": rule.scope}
                         for rule in site_exclusion_rules(site)],
    }
