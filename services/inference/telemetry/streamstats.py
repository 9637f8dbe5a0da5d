"""Windowed stream statistics: table keys, and rows read back for the Stats RPC and status.

Pure: ingest and redaction send `StreamCounts` to stats.counts.v1; an agent adds each
count to two windowed tables keyed by `stat_key(source, domain, kind)` (tumbling one
minute, hopping one hour), and `rows` turns what a window holds into sorted `StatRow`s,
filtered by source and domain.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from prometheus_client.core import GaugeMetricFamily

from services.inference.errors import OutOfRangeError
from services.inference.telemetry.drift import DriftState
from shared.errors import InvalidInput

MAX_FILTER_CHARS = 512  # a source or domain is at most this long (records.StreamCounts)


@dataclass(frozen=True, order=True)
class StatRow:
    source: str
    domain: str
    kind: str  # received, new, updated, deleted, dead_lettered.<reason>, pii.<type>
    count: int


def stat_key(source: str, domain: str, kind: str) -> str:
    """One key per (source, domain, kind); JSON, so no separator can occur in a name."""
    return json.dumps([source, domain, kind], ensure_ascii=False)


def split_key(key: str) -> tuple[str, str, str]:
    source, domain, kind = json.loads(key)
    return source, domain, kind


def rows(items: Iterable[tuple[str, int]], source: str = "", domain: str = "") -> list[StatRow]:
    """The window's non-zero counts, sorted; an empty filter matches everything."""
    out = []
    for key, count in items:
        s, d, kind = split_key(key)
        if count and (not source or s == source) and (not domain or d == domain):
            out.append(StatRow(s, d, kind, int(count)))
    return sorted(out)


def check_filter(value: str, field: str) -> str:
    """A source or domain filter as given, or InvalidInput naming the field."""
    if len(value) > MAX_FILTER_CHARS:
        raise InvalidInput("too_long", field, f"at most {MAX_FILTER_CHARS} characters")
    return value


WINDOWS = ("minute", "hour")


@dataclass(frozen=True)
class WindowCounts:
    """What one window of one stats table holds, and the drift state beside it."""

    start: float
    end: float
    rows: list[StatRow]
    drift: list[DriftState] = field(default_factory=list)


# (window name, at or 0 for now, source filter, domain filter) -> that window's counts;
# raises InvalidInput / OutOfRangeError for an instant it cannot read.
StatsView = Callable[[str, float, str, str], WindowCounts]


def window_instant(at: float, now: float, retention_s: float) -> float:
    """The instant to read (0: now), or InvalidInput / OutOfRange for one it cannot be."""
    if at == 0:
        return now
    if not at > 0 or at > now + 1.0:  # NaN fails the first test
        raise InvalidInput("not_a_past_instant", "at", "seconds since the epoch, not ahead "
                           "of the server's clock (0 for now)")
    if at < now - retention_s:
        raise OutOfRangeError("before_retention", "at",
                              f"older than the window retention ({retention_s:g} s)")
    return at


class WindowCollector:
    """/metrics: `streamrag_stream_window_count{window, source, domain, kind}`, the counts
    of the current minute and hour windows, read from the tables at each scrape."""

    def __init__(self, view: StatsView) -> None:
        self.view = view

    def collect(self) -> Iterable[GaugeMetricFamily]:
        family = GaugeMetricFamily("streamrag_stream_window_count",
                                   "Stream statistics in the current window",
                                   labels=["window", "source", "domain", "kind"])
        for window in WINDOWS:
            for row in self.view(window, 0.0, "", "").rows:
                family.add_metric([window, row.source, row.domain, row.kind], row.count)
        yield family
