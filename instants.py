"""How the service writes an instant: RFC 3339 in UTC with milliseconds and `Z`, for example
`2026-11-26T05:00:00.123Z`, in API answers, exports, live events, CSV files and log lines alike.

Milliseconds because that is what the store keeps (a BSON date), so an instant read back and
written out again is spelled the same; always three digits, so instants sort as text too.
Shared by every layer, like errors.py (docs/decisions.md, "One spelling of an instant"), with
the UTC day ranges the reports read over.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any, overload


@overload
def format_instant(moment: datetime) -> str: ...


@overload
def format_instant(moment: None) -> None: ...


@overload
def format_instant(moment: datetime | None) -> str | None: ...


def format_instant(moment: datetime | None) -> str | None:
    """`moment` as `2026-11-26T05:00:00.123Z` (None stays None); a naive one is taken as UTC."""
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def day_bounds(first: date, last: date) -> tuple[datetime, datetime]:
    """The UTC days `first` to `last` as [start, end): the instants a day range covers."""
    start = datetime(first.year, first.month, first.day, tzinfo=UTC)
    return start, datetime(last.year, last.month, last.day, tzinfo=UTC) + timedelta(days=1)


def days_condition(first: date | None, last: date | None) -> dict[str, Any]:
    """A query condition on an instant for the UTC days `first` to `last`, either open."""
    condition: dict[str, Any] = {}
    if first is not None:
        condition["$gte"] = day_bounds(first, first)[0]
    if last is not None:
        condition["$lt"] = day_bounds(last, last)[1]
    return condition


def previous_period(first: date, last: date) -> tuple[date, date]:
    """The days of the same length that end the day before `first`."""
    length = (last - first).days + 1
    return first - timedelta(days=length), first - timedelta(days=1)
