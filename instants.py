"""How the service writes an instant: RFC 3339 in UTC with milliseconds and `Z`, for example
`2026-11-26T05:00:00.123Z`, in API answers, exports, live events, CSV files and log lines alike.

Milliseconds because that is what the store keeps (a BSON date), so an instant read back and
written out again is spelled the same; always three digits, so instants sort as text too.
Shared by every layer, like errors.py (docs/decisions.md, "One spelling of an instant"), with
the days the figures are kept by and the reports read over: a site's days, in its time zone
(`DayClock`).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, overload
from zoneinfo import ZoneInfo


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


@dataclass(frozen=True)
class DayClock:
    """Where a site's days begin and end: midnight to midnight in its time zone, and in the
    zones it had before from when it had them (decision "Issue 41: one clock").

    `zones` are (from, zone) in time order, the first from None (always). A change takes
    effect when a day ends (`zone_change_instant`), and a day after it is never named before
    the day it followed (a zone far behind the old one makes its first day longer; one far
    ahead can skip a day), so the days read in time order are always in order.
    """

    zones: tuple[tuple[datetime | None, ZoneInfo], ...] = ((None, ZoneInfo("UTC")),)

    def _period(self, moment: datetime) -> int:
        return bisect_right([start for start, _zone in self.zones[1:]], moment)

    def _floor(self, period: int) -> date | None:
        """No day of the period is named before the day it began on by the zones before it."""
        start = self.zones[period][0]
        return None if start is None else self._date_in(period - 1, start)

    def _date_in(self, period: int, moment: datetime) -> date:
        local = moment.astimezone(self.zones[period][1]).date()
        floor = self._floor(period)
        return local if floor is None else max(local, floor)

    def date_of(self, moment: datetime) -> date:
        """The site's day a moment falls on (a naive moment is UTC)."""
        moment = _aware(moment)
        return self._date_in(self._period(moment), moment)

    def day_of(self, moment: datetime) -> str:
        """The day a moment falls on, as the day documents name it (2026-11-28)."""
        return self.date_of(moment).isoformat()

    def start_of(self, day: date) -> datetime:
        """The first instant of `day` (or of the first day after it, should a change of zone
        have skipped it)."""
        candidates = []
        for index, (start, zone) in enumerate(self.zones):
            end = self.zones[index + 1][0] if index + 1 < len(self.zones) else None
            floor = self._floor(index)
            if start is not None and floor is not None and day <= floor:
                first = start
            else:
                midnight = datetime.combine(day, time(), zone).astimezone(UTC)
                first = max(midnight, start) if start is not None else midnight
            if end is None or first < end:
                candidates.append(first)
        return min(candidates)

    def bounds(self, first: date, last: date) -> tuple[datetime, datetime]:
        """The days `first` to `last` as [start, end): the instants a day range covers."""
        return self.start_of(first), self.start_of(last + timedelta(days=1))

    def today(self, now: datetime | None = None) -> date:
        return self.date_of(now or datetime.now(UTC))

    def changes_within(self, first: date, last: date) -> list[dict[str, Any]]:
        """The changes of zone that take effect within the days `first` to `last`."""
        start, end = self.bounds(first, last)
        return [{"at": format_instant(at), "day": self.day_of(at),
                 "from": self.zones[index][1].key, "to": zone.key}
                for index, (at, zone) in enumerate(self.zones[1:])
                if at is not None and start <= at < end]


UTC_DAYS = DayClock()


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def zone_change_instant(clock: DayClock, now: datetime) -> datetime:
    """When a change of zone asked for at `now` takes effect: when the site's current day
    ends, so every day already begun keeps its cut."""
    return clock.start_of(clock.today(now) + timedelta(days=1))


def day_bounds(first: date, last: date, clock: DayClock = UTC_DAYS
               ) -> tuple[datetime, datetime]:
    """The days `first` to `last` as [start, end): the instants a day range covers."""
    return clock.bounds(first, last)


def days_condition(first: date | None, last: date | None, clock: DayClock = UTC_DAYS
                   ) -> dict[str, Any]:
    """A query condition on an instant for the days `first` to `last`, either open."""
    condition: dict[str, Any] = {}
    if first is not None:
        condition["$gte"] = clock.start_of(first)
    if last is not None:
        condition["$lt"] = clock.start_of(last + timedelta(days=1))
    return condition


def previous_period(first: date, last: date) -> tuple[date, date]:
    """The days of the same length that end the day before `first`."""
    length = (last - first).days + 1
    return first - timedelta(days=length), first - timedelta(days=1)
