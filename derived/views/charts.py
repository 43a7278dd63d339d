"""The days a chart, a report or a filter covers, and the daily chart.

A day is named like 2026-01-31 from FIRST_DAY to LAST_DAY; a chart covers at most
MAX_CHART_DAYS, the last DEFAULT_CHART_DAYS by default. The bounds helpers turn days into the
UTC instants a query compares against (the errors over a range, the overview, the recordings
and visitors filters).
"""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from derived import daily_figures
from documents.store import Store
from errors import InvalidInput

#: Longest chart range, so one request cannot unwind a site's whole history.
MAX_CHART_DAYS = 366
DEFAULT_CHART_DAYS = 30
#: The days a report or a filter may name. Nothing the service holds is older than 1970 (ingest
#: takes times at most 30 days old), and the last is a year short of the calendar's end, so a
#: range, the period of the same length before it and the instant after its last day all exist.
FIRST_DAY, LAST_DAY = date(1970, 1, 1), date(9998, 12, 31)


def parse_day(raw: str, field: str) -> date:
    """A day like 2026-01-31 from FIRST_DAY to LAST_DAY, or InvalidInput naming `field`."""
    try:
        day = date.fromisoformat(raw)
    except ValueError:
        raise InvalidInput(f"{field} is a day like 2026-01-31", field=field) from None
    if not FIRST_DAY <= day <= LAST_DAY:
        raise InvalidInput(f"{field} is a day from {FIRST_DAY} to {LAST_DAY}", field=field)
    return day


def chart_range(start: str | None, end: str | None, today: date) -> tuple[date, date]:
    """The inclusive (from, to) days of a chart; the last DEFAULT_CHART_DAYS by default."""
    named_first = parse_day(start, "from") if start else None
    last = parse_day(end, "to") if end else today
    first = named_first or max(last - timedelta(days=DEFAULT_CHART_DAYS - 1), FIRST_DAY)
    if first > last:
        raise InvalidInput("from is after to", field="from")
    if (last - first).days >= MAX_CHART_DAYS:
        raise InvalidInput(f"a chart covers at most {MAX_CHART_DAYS} days", field="from")
    return first, last


async def daily_counts(store: Store, site_id: str, first: date, last: date
                       ) -> list[dict[str, Any]]:
    """Pageviews and error occurrences per UTC day, every day of the range, from the daily
    figures kept at ingest (derived/daily_figures.py; restricted visitors are not in them)."""
    days = await daily_figures.site_days(store, site_id, first, last)
    return [{"day": day, "pageviews": figures["pageviews"], "errors": figures["errors"]}
            for day, figures in daily_figures.period(days, first, last).per_day.items()]
