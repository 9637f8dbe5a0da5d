"""Synthetic unit vectors around a topic direction, streamed into a detector window by window."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from services.retrieval.drift.detector import Detector, Sample
from shared.contract.records import DriftReport

DIM = 64


def topic(rng: np.random.Generator) -> np.ndarray:
    v = rng.normal(size=DIM)
    return v / np.linalg.norm(v)


def docs(rng: np.random.Generator, centre: np.ndarray, n: int, spread: float = 1.0,
         ) -> np.ndarray:
    """`n` unit vectors scattered around `centre` (spread: noise per dimension x sqrt(dim))."""
    v = centre + rng.normal(scale=spread / np.sqrt(DIM), size=(n, DIM))
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def feed(detector: Detector, windows: list[np.ndarray], words: list[dict[str, int]] | None = None,
         window_s: float = 60.0) -> list[DriftReport]:
    """Each array is one window's documents, spread evenly over it; then every window closes."""
    reports: list[DriftReport] = []
    for k, vectors in enumerate(windows):
        terms = (words or [{}] * len(windows))[k]
        for j, v in enumerate(vectors):
            at = (k + (j + 0.5) / len(vectors)) * window_s
            reports += detector.add(Sample(f"w{k}d{j}", 1, at, v, terms, f"doc {k}/{j}"))
    return reports + detector.tick(len(windows) * window_s + 3600)


@dataclass(frozen=True)
class PipelineRun:
    sent: int
    counted: int  # in some window's docs
    late: int  # arrived after their window closed (counted later, or dropped)
    windows: int
    too_few: int  # windows reported too_few_docs
    close_delay_s: float  # mean wall clock from a window's end to its report

    @property
    def dropped(self) -> int:
        return self.sent - self.counted


def slow_pipeline(detector: Detector, seed: int, windows: int = 30, per_window: float = 25.0,
                  window_s: float = 60.0, partitions: int = 4) -> PipelineRun:
    """A source's documents through a deliberately slow, uneven pipeline into `detector`.

    Ingest times are a Poisson stream of `per_window` documents a window. Each goes to one of
    `partitions` upstream partitions, each behind the wall clock by its own delay that swells
    and shrinks over minutes (2 to 100 s, as on a loaded machine where one partition's
    worker falls behind), plus a few seconds' jitter, and each stalls now and then for 20 to
    60 s (a restart, a rebalance) and then delivers what it held; a partition delivers in
    order. The detector is fed in arrival order with the wall clock, and ticked every
    second, as the agent does."""
    rng = np.random.default_rng(seed)
    n = int(rng.poisson(per_window * windows))
    ingest = np.sort(rng.uniform(0.0, windows * window_s, n))
    part = rng.integers(0, partitions, n)
    base, amp = rng.uniform(2, 10, partitions), rng.uniform(20, 90, partitions)
    period, phase = rng.uniform(300, 900, partitions), rng.uniform(0, 2 * np.pi, partitions)
    delay = (base[part] + amp[part] * (1 + np.sin(2 * np.pi * ingest / period[part]
                                                  + phase[part])) / 2
             + rng.uniform(0, 3, n))
    arrival = ingest + delay
    span = windows * window_s
    for p in range(partitions):
        mine = np.flatnonzero(part == p)
        for start in rng.uniform(0, span, max(1, int(span / 600))):  # a stall per 10 min
            until = start + rng.uniform(20, 60)
            arrival[mine[(arrival[mine] >= start) & (arrival[mine] < until)]] = until
        arrival[mine] = np.maximum.accumulate(arrival[mine])  # in order within a partition
    vectors = docs(rng, topic(rng), n)
    order = np.argsort(arrival, kind="stable")
    reports: list[DriftReport] = []
    clock, k = 0.0, 0
    end = float(arrival.max()) + 3 * window_s if n else 0.0
    while clock <= end:
        while k < n and arrival[order[k]] <= clock:
            i = int(order[k])
            reports += detector.add(Sample(f"d{i}", 1, float(ingest[i]), vectors[i], {}),
                                    now=float(arrival[i]))
            k += 1
        reports += detector.tick(clock)
        clock += 1.0
    closed = list(reports)  # closed while the stream ran
    reports += detector.tick(end + 3600)
    return PipelineRun(n, sum(r.docs for r in reports), sum(r.late for r in reports),
                       len(reports), sum(r.status == "too_few_docs" for r in reports),
                       sum(r.at - r.window_end for r in closed) / max(len(closed), 1))
