"""Drift detection per (source, domain, model) over tumbling windows (pure).

Each closed window gets a centroid statistic against the pooled last K judged windows
(window.centroid_score: about 1 when nothing changed), and the log of it is z-scored against
the same statistic of the last K stable windows. Above the threshold the window is a drift
event, named with its farthest documents and most over-represented words, and the reference
centroid starts again from that window: one change raises one event, not one per window until
the old windows age out. The statistic's history is kept across that restart (its scale does
not depend on the topic: about 1 for any stationary stream), so the next window is judged at
once instead of after a new warm-up. Windows with too few documents are reported but neither
judged nor kept.
"""

from __future__ import annotations

import math
from collections import OrderedDict, deque
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from services.retrieval.drift.window import (
    Far,
    Reference,
    Window,
    centroid_score,
    cosine_distance,
    responsible_terms,
    z_score,
)
from shared.contract.records import DriftDocument, DriftReport, DriftStatus

Key = tuple[str, str, str]  # (source, domain, model id)


@dataclass(frozen=True)
class DriftConfig:
    window_s: float = 60.0
    history: int = 10  # K: judged windows in the reference
    threshold: float = 2.5  # z above which a window is a drift event
    min_docs: int = 20  # documents a window needs to be judged
    min_history: int = 5  # scored windows the reference needs before judging
    # A window stays open this long past its end (see Detector); None: grace_share of the
    # window, so lateness scales with it.
    grace_s: float | None = None
    grace_share: float = 0.5
    std_floor: float = 0.25  # least std of the log statistic (see docs/design/drift.md)
    top_docs: int = 3
    top_terms: int = 8
    max_keys: int = 1_000  # detectors kept; the least recently fed is dropped beyond

    @property
    def grace(self) -> float:
        return self.grace_s if self.grace_s is not None else self.grace_share * self.window_s


@dataclass(frozen=True)
class Sample:
    doc_id: str
    version: int
    at: float  # ingest time
    vector: np.ndarray  # unit
    terms: Mapping[str, int]
    title: str = ""


class Detector:
    """One (source, domain, model): its open windows and the reference behind them.

    A window stays open the grace past its end, so samples that come out of order (from
    different partitions upstream, each at its own pace) still count. With the wall clock
    known it closes when the wall clock minus the pipeline's delay gets there: the delay is
    the largest of the recent samples' (wall clock at arrival minus ingest time, over the
    last window and grace), so the slowest partition upstream sets the pace, not the
    fastest. Without the wall clock (a stream replayed by a test or a benchmark) a sample
    that much later closes it. Until then the next window may be open beside it.

    A sample whose window has closed all the same is counted in the first window still
    open (`late` in its report): a window is judged on what arrived while it was open.
    Only a sample of the past (its window closed more than a window ago, or a delay a
    window longer than the pipeline's: a replay) is dropped, and counted (`dropped`).
    """

    def __init__(self, key: Key, config: DriftConfig, reference: Reference | None = None,
                 scores: list[float] | None = None, horizon: float = 0.0) -> None:
        self.key, self.config = key, config
        self.reference = reference or Reference(config.history)
        self.scores = (scores or [])[-config.history:]  # log statistic of stable windows
        self.open: dict[float, Window] = {}  # by start
        self.horizon = horizon  # end of the last closed window
        self.dropped = 0  # samples of the past, counted in no window, since the last report
        self.lag = 0.0  # the pipeline's delay: the largest recent wall clock - ingest time
        self._delays: deque[tuple[float, float]] = deque()  # (arrival, delay), delays falling
        self._closed_seen: dict[float, set[tuple[str, int]]] = {}  # the last closed window's
        self._mu = self.reference.centroid()

    def add(self, sample: Sample, now: float | None = None) -> list[DriftReport]:
        """Take a sample (arriving at wall clock `now`, when known); the reports of the
        windows it closes."""
        if now is not None and sample.at >= self.horizon:  # a late one says nothing of now
            self._observe(now, max(0.0, now - sample.at))
        reports = self._close_until(sample.at if now is None else now - self.lag,
                                    sample.at if now is None else now)
        size, key = self.config.window_s, (sample.doc_id, sample.version)
        own = math.floor(sample.at / size) * size
        start = own
        if sample.at < self.horizon:  # its window is closed
            if key in self._closed_seen.get(own, ()):
                return reports  # a replayed record its window counted
            if not self._recent(sample, now):
                self.dropped += 1
                return reports
            start = math.ceil(self.horizon / size) * size  # the first window still open
        window = self.open.get(start)
        if window is None:
            window = self.open[start] = Window(start, start + size)
        if key in window.seen:
            return reports  # a replayed record: at least once upstream
        window.seen.add(key)
        window.late += start != own
        far = None if self._mu is None else Far(
            cosine_distance(sample.vector, self._mu), sample.doc_id, sample.version,
            sample.title, sample.vector.astype(np.float32))
        window.add(sample.vector, sample.terms, far, self.config.top_docs)
        return reports

    def tick(self, now: float) -> list[DriftReport]:
        """Close what a quiet key's windows would have closed by now (wall clock)."""
        return self._close_until(now - self.lag, now)

    def _observe(self, now: float, delay: float) -> None:
        """The pipeline's delay: the largest of the samples' that arrived in the last window
        and grace (a sliding maximum; kept as it was while the key is quiet)."""
        while self._delays and self._delays[0][0] < now - self.config.window_s \
                - self.config.grace:
            self._delays.popleft()
        while self._delays and self._delays[-1][1] <= delay:
            self._delays.pop()
        self._delays.append((now, delay))
        self.lag = self._delays[0][1]

    def _recent(self, sample: Sample, now: float | None) -> bool:
        """A late sample of now, not of the past: its window closed at most a window ago,
        and it is no more than a window later than the pipeline's delay and the grace."""
        size = self.config.window_s
        return sample.at >= self.horizon - size and (
            now is None or now - sample.at <= self.lag + self.config.grace + size)

    def _close_until(self, at: float, now: float) -> list[DriftReport]:
        """Close, oldest first, the windows whose end plus the grace is at or before `at`
        (of ingest time); `now` is the closing time the reports carry."""
        return [self.close(start, now) for start in sorted(self.open)
                if self.open[start].end + self.config.grace <= at]

    def close(self, start: float, at: float) -> DriftReport:
        window, ref, cfg = self.open.pop(start), self.reference, self.config
        window.dropped, self.dropped = self.dropped, 0
        self.horizon = max(self.horizon, window.end)
        self._closed_seen = {window.start: window.seen}
        base: dict[str, object] = {"history": len(self.scores)}
        if window.count < cfg.min_docs:
            return self._report("too_few_docs", window, at, base)
        score = centroid_score(window, ref)
        log_score = None if score is None else math.log(max(score, 1e-9))
        if log_score is None or len(self.scores) < cfg.min_history:
            self._keep(window, log_score)
            return self._report("warming_up", window, at, {**base, "score": log_score})
        z, mean, std = z_score(log_score, self.scores, cfg.std_floor)
        stats = {**base, "score": log_score, "z": z, "mean": mean, "std": std}
        if z <= cfg.threshold:
            self._keep(window, log_score)
            return self._report("stable", window, at, stats)
        assert self._mu is not None  # a scored window has a reference
        report = self._report("drift", window, at, {**stats, "documents": [
            DriftDocument(doc_id=f.doc_id, version=f.version, title=f.title,
                          distance=round(f.distance, 4))
            for f in window.responsible(self._mu, cfg.top_docs)],
            "terms": responsible_terms(window.terms, ref.terms(), cfg.top_terms)})
        self.reference = Reference(cfg.history)  # the new regime is the reference from now
        self._keep(window, None)
        return report

    def _keep(self, window: Window, log_score: float | None) -> None:
        self.reference.push(window)
        self._mu = self.reference.centroid()
        if log_score is not None:
            self.scores = [*self.scores, log_score][-self.config.history:]

    def _report(self, status: DriftStatus, window: Window, at: float,
                fields: dict[str, object]) -> DriftReport:
        source, domain, model_id = self.key
        return DriftReport.model_validate({
            "source": source, "domain": domain, "model_id": model_id,
            "window_start": window.start, "window_end": window.end, "docs": window.count,
            "late": window.late + window.dropped, "dropped": window.dropped, "status": status,
            "threshold": self.config.threshold, "at": at, **fields})


class Monitor:
    """Every key's detector, at most `max_keys` of them (the least recently fed go first)."""

    def __init__(self, config: DriftConfig) -> None:
        self.config = config
        self.detectors: OrderedDict[Key, Detector] = OrderedDict()

    def add(self, key: Key, sample: Sample, now: float | None = None) -> list[DriftReport]:
        detector = self.detectors.get(key)
        if detector is None:
            detector = self.detectors[key] = Detector(key, self.config)
            while len(self.detectors) > self.config.max_keys:
                self.detectors.popitem(last=False)
        self.detectors.move_to_end(key)
        return detector.add(sample, now)

    def tick(self, now: float) -> list[DriftReport]:
        return [r for d in list(self.detectors.values()) for r in d.tick(now)]

    def dim(self, key: Key) -> int | None:
        """The vector length of `key`'s windows so far (None: none yet)."""
        detector = self.detectors.get(key)
        if detector is None:
            return None
        totals = [w.total for w in detector.open.values()]
        totals += [p.total for p in detector.reference.past]
        return next((len(t) for t in totals if t is not None and len(t)), None)
