"""Event-time watermarks per source and partition, and how late changes arrive.

Pure, no Kafka. A `SourceClock` (one per source and docs.parsed.v1 partition, held in the
`source_clocks` table) keeps the newest event time seen; its watermark is that minus the
allowed lateness (`STREAMRAG_INGEST_ALLOWED_LATENESS_S`). A change behind the watermark
is late: it is counted, and still applied when it is newer for its document (ordering is
per document, by source position; lateness only measures). Lateness, how far a change's
event time is behind the newest seen, goes into a histogram with `LATENESS_EDGES_S`.
A source's watermark is the lowest of its partitions' (every partition has passed it);
its event-time lag is now minus the freshest event time it had applied.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypedDict

# Upper edges of the lateness histogram's buckets, seconds; one more bucket takes the rest.
LATENESS_EDGES_S = (0.0, 1.0, 10.0, 60.0, 600.0, 3600.0, 86400.0)


class SourceClock(TypedDict):
    max_event_time: float  # the newest event time seen (applied or not)
    freshest_applied: float  # the newest event time among applied changes; 0 before one
    seen: int
    late: int  # behind the watermark when they arrived
    late_applied: int  # of those, applied (newer for their document)
    lateness: list[int]  # counts per bucket of LATENESS_EDGES_S, plus one for the rest


@dataclass(frozen=True)
class Observed:
    clock: SourceClock
    lateness_s: float  # behind the newest event time seen before it (0 when newest)
    late: bool


def clock_key(source: str, partition: int) -> str:
    return f"{source}@{partition}"


def source_of(key: str) -> str:
    return key.rpartition("@")[0]


def bucket_of(lateness_s: float) -> int:
    return bisect.bisect_left(LATENESS_EDGES_S, lateness_s)


def observe(clock: SourceClock | None, event_time: float, applied: bool,
            allowed_lateness_s: float) -> Observed:
    """The clock after one change at `event_time`, and whether that change was late."""
    if clock is None:
        clock = SourceClock(max_event_time=event_time, freshest_applied=0.0, seen=0, late=0,
                            late_applied=0, lateness=[0] * (len(LATENESS_EDGES_S) + 1))
    lateness = max(0.0, clock["max_event_time"] - event_time)
    late = event_time < clock["max_event_time"] - allowed_lateness_s
    hist = list(clock["lateness"])
    hist[bucket_of(lateness)] += 1
    fresh = clock["freshest_applied"]
    new = SourceClock(
        max_event_time=max(clock["max_event_time"], event_time),
        freshest_applied=max(fresh, event_time) if applied else fresh,
        seen=clock["seen"] + 1, late=clock["late"] + late,
        late_applied=clock["late_applied"] + (late and applied), lateness=hist)
    return Observed(new, lateness, late)


@dataclass(frozen=True)
class SourceTime:
    """One source's event-time standing, over its partitions."""

    source: str
    watermark: float  # seconds since the epoch
    freshest_applied: float  # the newest event time applied; 0 before one
    lag_s: float | None  # now - freshest_applied; None before any applied
    seen: int
    late: int
    late_applied: int
    lateness: dict[str, int]  # histogram: "<=edge" or ">last edge" -> count
    partitions: dict[int, float]  # partition -> its watermark


def summarize(clocks: Iterable[tuple[str, SourceClock]], allowed_lateness_s: float,
              now: float) -> list[SourceTime]:
    """Per source (sorted by name): watermark, lag and lateness summed over partitions."""
    by_source: dict[str, list[tuple[int, SourceClock]]] = {}
    for key, clock in clocks:
        partition = int(key.rpartition("@")[2])
        by_source.setdefault(source_of(key), []).append((partition, clock))
    return [_one(name, parts, allowed_lateness_s, now)
            for name, parts in sorted(by_source.items())]


def _one(name: str, parts: list[tuple[int, SourceClock]], allowed: float,
         now: float) -> SourceTime:
    marks = {p: c["max_event_time"] - allowed for p, c in parts}
    fresh = max(c["freshest_applied"] for _, c in parts)
    hist = [sum(c["lateness"][i] for _, c in parts) for i in range(len(LATENESS_EDGES_S) + 1)]
    return SourceTime(
        source=name, watermark=min(marks.values()), freshest_applied=fresh,
        lag_s=now - fresh if fresh else None,
        seen=sum(c["seen"] for _, c in parts), late=sum(c["late"] for _, c in parts),
        late_applied=sum(c["late_applied"] for _, c in parts),
        lateness=histogram_labels(hist), partitions=dict(sorted(marks.items())))


def histogram_labels(hist: list[int]) -> dict[str, int]:
    labels = [f"<={edge:g}s" for edge in LATENESS_EDGES_S] + [f">{LATENESS_EDGES_S[-1]:g}s"]
    return dict(zip(labels, hist, strict=True))
