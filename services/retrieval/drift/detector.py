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
from collections import OrderedDict
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
    grace_s: float = 10.0  # a window stays open this long past its end (see Detector)
    std_floor: float = 0.25  # least std of the log statistic (see docs/design/drift.md)
    top_docs: int = 3
    top_terms: int = 8
    max_keys: int = 1_000  # detectors kept; the least recently fed is dropped beyond


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

    A window stays open `grace_s` past its end, so samples that come a little out of order
    (from different partitions upstream) still count: it closes when a sample at least that
    much later arrives, or, for a key gone quiet, when the wall clock minus the pipeline's
    delay (how far behind the wall clock the newest sample arrived) gets there. Until then
    the next window may be open beside it.
    """

    def __init__(self, key: Key, config: DriftConfig, reference: Reference | None = None,
                 scores: list[float] | None = None, horizon: float = 0.0) -> None:
        self.key, self.config = key, config
        self.reference = reference or Reference(config.history)
        self.scores = (scores or [])[-config.history:]  # log statistic of stable windows
        self.open: dict[float, Window] = {}  # by start
        self.horizon = horizon  # end of the last closed window
        self.late = 0  # samples for closed windows since the last report
        self.lag = 0.0  # wall clock minus ingest time, when the newest sample arrived
        self._mu = self.reference.centroid()

    def add(self, sample: Sample, now: float | None = None) -> list[DriftReport]:
        """Take a sample (arriving at wall clock `now`, when known); the reports of the
        windows it closes."""
        reports = self._close_until(sample.at, sample.at if now is None else now)
        if sample.at < self.horizon:  # its window is closed: counted, not added
            self.late += 1
            return reports
        if now is not None:  # a late sample (a replay) says nothing of the delay now
            self.lag = max(0.0, now - sample.at)
        start = math.floor(sample.at / self.config.window_s) * self.config.window_s
        window = self.open.get(start)
        if window is None:
            window = self.open[start] = Window(start, start + self.config.window_s)
        if (sample.doc_id, sample.version) in window.seen:
            return reports  # a replayed record: at least once upstream
        window.seen.add((sample.doc_id, sample.version))
        far = None if self._mu is None else Far(
            cosine_distance(sample.vector, self._mu), sample.doc_id, sample.version,
            sample.title, sample.vector.astype(np.float32))
        window.add(sample.vector, sample.terms, far, self.config.top_docs)
        return reports

    def tick(self, now: float) -> list[DriftReport]:
        """Close what a quiet key's windows would have closed by now (wall clock)."""
        return self._close_until(now - self.lag, now)

    def _close_until(self, at: float, now: float) -> list[DriftReport]:
        """Close, oldest first, the windows whose end plus the grace is at or before `at`
        (of ingest time); `now` is the closing time the reports carry."""
        return [self.close(start, now) for start in sorted(self.open)
                if self.open[start].end + self.config.grace_s <= at]

    def close(self, start: float, at: float) -> DriftReport:
        window, ref, cfg = self.open.pop(start), self.reference, self.config
        window.late, self.late = window.late + self.late, 0
        self.horizon = max(self.horizon, window.end)
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
            "late": window.late, "status": status,
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
