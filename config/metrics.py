"""Counters in Prometheus text format: what was accepted, stored and dropped, and why.

One `Metrics` object per process, owned by the app. Every drop anywhere is counted here with a
reason, so "sent = stored + dropped" can be checked from the outside.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable


class Metrics:
    """Labelled counters; names follow Prometheus conventions (`_total` suffix)."""

    def __init__(self) -> None:
        self._counters: Counter[tuple[str, tuple[tuple[str, str], ...]]] = Counter()
        self._help: dict[str, str] = {}
        self._gauges: dict[str, tuple[str, Callable[[], float]]] = {}
        self._read_counters: dict[str, tuple[str, Callable[[], float]]] = {}

    def gauge(self, name: str, help_text: str, read: Callable[[], float]) -> None:
        """Expose `read()` as the gauge `name`; read at every scrape, so it is never stale."""
        self._gauges[name] = (help_text, read)

    def counter(self, name: str, help_text: str, read: Callable[[], float]) -> None:
        """Expose `read()`, a count that only grows and is kept elsewhere, as the counter
        `name`; read at every scrape."""
        self._read_counters[name] = (help_text, read)

    def gauge_value(self, name: str) -> float:
        """The gauge's current value."""
        return self._gauges[name][1]()

    def count(self, name: str, help_text: str, amount: int = 1, **labels: str) -> None:
        """Add `amount` to the counter `name` with these labels."""
        self._help.setdefault(name, help_text)
        self._counters[(name, tuple(sorted(labels.items())))] += amount

    def value(self, name: str, **labels: str) -> int:
        """The current value of one labelled counter (0 when never counted)."""
        return self._counters[(name, tuple(sorted(labels.items())))]

    def total(self, name: str, **labels: str) -> int:
        """The sum over every counter `name` whose labels include `labels`."""
        wanted = set(labels.items())
        return sum(v for (n, lbls), v in self._counters.items()
                   if n == name and wanted <= set(lbls))

    def render(self) -> str:
        """The exposition text."""
        lines: list[str] = []
        for name in sorted(self._help):
            lines.append(f"# HELP {name} {self._help[name]}")
            lines.append(f"# TYPE {name} counter")
            for (counter, labels), value in sorted(self._counters.items()):
                if counter != name:
                    continue
                rendered = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
                lines.append(f"{name}{{{rendered}}} {value}" if rendered else f"{name} {value}")
        for kind, readings in (("counter", self._read_counters), ("gauge", self._gauges)):
            for name, (help_text, read) in sorted(readings.items()):
                lines.append(f"# HELP {name} {help_text}")
                lines.append(f"# TYPE {name} {kind}")
                lines.append(f"{name} {read()}")
        return "\n".join(lines) + "\n"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
