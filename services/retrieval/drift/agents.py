"""Retrieval's drift agents: sample each embedded upsert, judge each source's windows.

The index agent calls `sample` for every chunk set it applies; the sample goes to
drift.samples.v1 keyed by source, so whichever worker owns that partition judges all of
a source's domains and models. `judge` feeds the detectors; a timer closes idle windows.
Every closed window is sent to drift.windows.v1 (inference keeps the newest per key for the
Stats RPC) and shown on this worker's /metrics; the references are saved to the data dir.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import faust
from prometheus_client import Counter, Gauge

from services.retrieval.app import Topics
from services.retrieval.drift.detector import Monitor
from services.retrieval.drift.sample import drift_sample, from_record
from services.retrieval.drift.snapshot import restore, save
from services.retrieval.settings import RetrievalSettings
from shared.contract.codec import decode, encode
from shared.contract.records import DriftReport, DriftSample, EmbeddedChunkSet
from shared.kafka import checkpoint
from shared.worker.boundary import Boundary

log = logging.getLogger(__name__)
LABELS = ("source", "domain", "model")
SCORE = Gauge("streamrag_drift_score", "Log of the centroid statistic of the last closed "
              "window (about 0 when nothing changed)", LABELS)
Z = Gauge("streamrag_drift_z", "z-score of the last judged window against the last K", LABELS)
WINDOWS = Counter("streamrag_drift_windows", "Closed drift windows by status", [*LABELS, "status"])
EVENTS = Counter("streamrag_drift_events", "Drift events raised", LABELS)
LATE = Counter("streamrag_drift_late_samples", "Samples that arrived after their window "
               "closed: counted in the next window still open, or dropped", LABELS)
DROPPED = Counter("streamrag_drift_dropped_samples", "Late samples of the past (a replay) "
                  "counted in no window", LABELS)


class Drift:
    """The drift judge of one retrieval stage: its detectors, topics and boundary."""

    def __init__(self, app: faust.App, settings: RetrievalSettings, topics: Topics) -> None:
        self.app, self.settings = app, settings
        self.samples_topic, self.windows_topic = topics.drift_samples, topics.drift_windows
        self.monitor: Monitor = restore(settings.drift_snapshot, settings.drift_config())
        self.boundary = Boundary("retrieval.drift", topics.dlq)
        self.judge: Any = None  # the Faust agent, once registered

    def register(self) -> Any:
        """Register the drift judge and its window timer on the app; the judge agent."""
        app = self.app
        self.judge = app.agent(self.samples_topic, name=f"{__name__}.judge")(
            self.judge_samples)
        app.timer(1.0, name=f"{app.conf.id}.close_drift_windows")(self.close_idle_windows)
        return self.judge

    async def sample(self, update: EmbeddedChunkSet) -> None:
        """Send the drift sample of an applied chunk set (recent upserts only)."""
        if not self.settings.drift or \
                time.time() - update.ingest_time > self.settings.drift_max_age_s:
            return
        record = drift_sample(update)
        if record is not None:
            await self.samples_topic.send(key=record.source.encode(), value=encode(record))

    async def publish(self, reports: list[DriftReport]) -> None:
        for report in reports:
            labels = (report.source, report.domain, report.model_id)
            WINDOWS.labels(*labels, report.status).inc()
            LATE.labels(*labels).inc(report.late)
            DROPPED.labels(*labels).inc(report.dropped)
            if report.score is not None:
                SCORE.labels(*labels).set(report.score)
            if report.z is not None:
                Z.labels(*labels).set(report.z)
            if report.status == "drift":
                EVENTS.labels(*labels).inc()
                log.warning("drift in %s/%s (%s) window %.0f: z %.1f, words %s", *labels,
                            report.window_start, report.z or 0.0, ", ".join(report.terms))
            await self.windows_topic.send(key=report.source.encode(), value=encode(report))
        if reports:
            save(self.monitor, self.settings.drift_snapshot)

    async def judge_samples(self, stream: Any) -> None:
        """drift.samples.v1 -> the detectors -> drift.windows.v1."""
        async for event in checkpoint.records(stream):
            reports: list[DriftReport] = []
            async with self.boundary.record(event):
                record = decode(DriftSample, event.message.value)
                key = (record.source, record.domain, record.model_id)
                reports = self.monitor.add(key, from_record(record, self.monitor.dim(key)),
                                           time.time())
            await self.publish(reports)

    async def close_idle(self, now: float) -> None:
        await self.publish(self.monitor.tick(now))

    async def close_idle_windows(self) -> None:  # a timer: no arguments (Faust passes app)
        await self.close_idle(time.time())
