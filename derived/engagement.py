"""Engagement on the overview (issue 41 point 4): bounce rate, median session length, median
time on page and average scroll depth, each from folded counts (no raw scan).

* A session's length (its last pageview less its first) and a pageview's time on page are
  counted in duration buckets (`bucket_of`): exact to the second under a minute, then to 5 s
  under 5 minutes, to 30 s under half an hour, to 5 minutes under 4 hours, and "4 h or more".
  A median is the lower bound of the bucket the middle value falls in, so it is exact to the
  bucket: a count per distinct second would make a document per second a day.
* Sessions come from `session_days` (`visits.contributions`: dimensions `bounce` and
  `length`); a bounce is a session of one pageview.
* Time on page and scroll depth come from `site_days` (derived/daily_figures.py): a pageview's
  time on page is counted when the loader reports it, and moved when a longer report replaces
  it; scroll depth as the views measured and, per DEPTH_STEP %, the views that reached it, as
  the scroll heatmap counts them (documents/heatmaps.py).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from documents.heatmaps import DEPTH_STEP

#: (up to this many seconds, in steps of this many): the duration buckets.
_STEPS = ((60, 1), (300, 5), (1800, 30), (4 * 3600, 300))
#: Every duration of at least this many seconds is one bucket.
LONGEST = _STEPS[-1][0]
BOUNCE, LENGTH = "bounce", "length"
#: How the figures are made, in one sentence for the page.
METHOD = ("Bounce rate: sessions of one pageview among all sessions. Session length: from a "
          "session's first pageview to its last. Medians are exact to the second under a "
          "minute, then to 5 s, 30 s and 5 minutes. Scroll depth: the average deepest point "
          f"of each measured pageview, in {DEPTH_STEP} % steps.")


def bucket_of(seconds: float) -> int:
    """The lower bound, in seconds, of the duration bucket `seconds` falls in."""
    seconds = max(0, int(seconds))
    for bound, step in _STEPS:
        if seconds < bound:
            return seconds - seconds % step
    return LONGEST


def median_of(buckets: Counter[str]) -> int | None:
    """The lower bound of the bucket holding the median of these counts per bucket (the
    lower middle of an even number); None when there are none."""
    total = sum(count for count in buckets.values() if count > 0)
    if not total:
        return None
    middle = (total + 1) // 2
    seen = 0
    for bound in sorted(int(name) for name, count in buckets.items() if count > 0):
        seen += buckets[str(bound)]
        if seen >= middle:
            return bound
    return None  # unreachable: the counts add up to total


def figures(sessions: dict[str, Counter[str]], time_on_page: Counter[str], scroll_views: int,
            scroll_reach: Counter[str]) -> dict[str, float | None]:
    """A period's engagement figures from its folded counts; None where nothing was measured."""
    bounces, sessions_counted = sessions[BOUNCE]["1"], sum(sessions[BOUNCE].values())
    reached = sum(count for count in scroll_reach.values() if count > 0)
    return {
        "bounceRate": round(bounces / sessions_counted, 4) if sessions_counted else None,
        "medianSessionSeconds": median_of(sessions[LENGTH]),
        "medianTimeOnPageSeconds": median_of(time_on_page),
        "averageScrollDepth": round(reached * DEPTH_STEP / scroll_views, 1)
        if scroll_views else None,
    }


def with_previous(now: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    """Each figure with the previous period's and the change (a difference for a rate or a
    depth, relative for a time), None where either is missing."""
    shown = {}
    for name, value in now.items():
        previous = before.get(name)
        change = None
        if value is not None and previous is not None:
            if name in ("bounceRate", "averageScrollDepth"):
                change = round(value - previous, 4)
            elif previous:
                change = round((value - previous) / previous, 4)
        shown[name] = {"value": value, "previous": previous, "change": change}
    return shown
