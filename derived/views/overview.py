"""The overview page: the period's figures against the previous period's, the top pages, errors
and frustrated pages, countries, devices, money and traffic.
"""

from __future__ import annotations

from collections import Counter
from datetime import date
from typing import Any

from derived import daily_figures, derivation, engagement
from documents import commerce, error_records, sites
from documents.store import Store
from instants import previous_period

#: Rows of each overview ranking.
TOP_ITEMS = 10


def _change(now: float, before: float) -> float | None:
    """The relative change against the previous period; None when there was nothing before."""
    return round((now - before) / before, 4) if before else None


def _ranked(counts: Counter[Any], total: int | None = None) -> list[dict[str, Any]]:
    whole = total if total is not None else sum(counts.values())
    return [{"name": name, "count": count, "share": round(count / whole, 4) if whole else 0}
            for name, count in sorted(counts.items(), key=lambda kv: (-kv[1], str(kv[0])))
            [:TOP_ITEMS]]


async def overview(store: Store, site: dict[str, Any], first: date, last: date
                   ) -> dict[str, Any]:
    """Visitors, pageviews, errors, leads and leads per visitor between `first` and `last`, each
    with the previous period's figure and the change; top pages, top errors, the pages with
    the most rage and dead clicks, and the visitors' countries and devices; the money figures
    in the site's reporting currency (documents/commerce.py).

    Everything comes from the folded figures (derived/daily_figures.py), which leave
    restricted visitors out as every other read does; engagement too (derived/engagement.py).
    """
    site_id = site["_id"]
    before_first, before_last = previous_period(first, last)
    days = await daily_figures.site_days(store, site_id, before_first, last)
    now, before = daily_figures.period(days, first, last), daily_figures.period(
        days, before_first, before_last)
    pages = await daily_figures.page_figures(store, site_id, first, last)
    sessions = await daily_figures.session_figures(store, site_id, first, last)
    sessions_before = await daily_figures.session_figures(
        store, site_id, before_first, before_last,
        dimensions=(engagement.BOUNCE, engagement.LENGTH))
    errors = await daily_figures.error_figures(store, site_id, first, last)
    top_errors = sorted(errors.items(), key=lambda item: (-item[1].occurrences, item[0])
                        )[:TOP_ITEMS]
    aggregates = {e["_id"]: e async for e in error_records.errors_matching(
        store, {"_id": {"$in": [error_id for error_id, _ in top_errors]}, "siteId": site_id},
        {"type": 1, "message": 1, "status": 1, "source": 1})}
    frustrated = sorted((row for row in pages if row["rageClicks"] or row["deadClicks"]),
                        key=lambda row: (-(row["rageClicks"] + row["deadClicks"]), row["_id"]))
    previously = _figures(before)
    currency = commerce.reporting_currency(site)
    return {
        "from": first.isoformat(), "to": last.isoformat(),
        "figuresAsOf": await derivation.oldest_unfolded(store, site_id),
        # Days before a change of time zone were cut in the zone of their time.
        "zoneChanges": sites.day_clock(site).changes_within(before_first, last),
        "previous": {"from": before_first.isoformat(), "to": before_last.isoformat()},
        "figures": {name: {"value": value, "previous": previously[name],
                           "change": _change(value, previously[name])}
                    for name, value in _figures(now).items()},
        "topPages": _ranked(Counter({row["_id"]: row["pageviews"] for row in pages
                                     if row["pageviews"]}), now.pageviews),
        "topErrors": [{"id": error_id, "count": counted.occurrences,
                       "lastSeen": counted.last_seen,
                       "type": aggregates.get(error_id, {}).get("type"),
                       "message": aggregates.get(error_id, {}).get("message"),
                       "status": aggregates.get(error_id, {}).get("status")}
                      for error_id, counted in top_errors],
        "frustration": [{"page": row["_id"], "rageClicks": row["rageClicks"],
                         "deadClicks": row["deadClicks"]} for row in frustrated[:TOP_ITEMS]],
        "countries": _ranked(now.countries, now.visitors),
        "devices": _ranked(now.devices, now.visitors),
        "commerce": commerce.money_overview(now, before, *currency),
        "traffic": _traffic(sessions),
        "engagement": engagement.with_previous(_engagement(now, sessions),
                                               _engagement(before, sessions_before)),
        "engagementMethod": engagement.METHOD,
    }


def _engagement(period: daily_figures.Period, sessions: dict[str, Counter[str]]
                ) -> dict[str, float | None]:
    return engagement.figures(sessions, period.time_on_page, period.scroll_views,
                              period.scroll_reach)


def _traffic(sessions: dict[str, Counter[str]]) -> dict[str, Any]:
    """Where the period's sessions came from and where they entered and left, each ranked
    with its share of all sessions (derived/visits.py says how a source is named)."""
    total = sessions["all"]["sessions"]
    return {"sessions": total,
            **{name: _ranked(sessions[dimension], total) for name, dimension in (
                ("sources", "source"), ("referrers", "referrer"),
                ("utmSources", "utmSource"), ("utmMediums", "utmMedium"),
                ("utmCampaigns", "utmCampaign"), ("entryPages", "entry"),
                ("exitPages", "exit"))}}


def _figures(period: daily_figures.Period) -> dict[str, float]:
    return {"visitors": period.visitors, "pageviews": period.pageviews,
            "errors": period.errors, "leads": period.leads,
            "leadsPerVisitor": round(period.leads / period.visitors, 4) if period.visitors
            else 0}
