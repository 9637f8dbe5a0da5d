"""Inference's Faust side: the feedback and latency agents, and the gRPC runtime beside them.

The topics and tables they use are declared in app.py; `build` registers everything on an
app.

Feedback (clicks and skips on cited chunks) arrives on feedback.v1 keyed by chunk id and
is counted in hopping one-hour windows (5-minute steps); the query engine reads the
window around now to boost or demote chunks. Bad records are dead-lettered.

Each instance counts the partitions it is assigned: with several inference instances a
chunk's feedback boosts only on the instance that owns its partition (a known limit of
per-partition tables).

Finished calls' latencies go the same way: the handlers buffer them, a one-second timer
sends them to query.latency.v1 keyed by method, and an agent counts them per log-spaced
bucket in tumbling one-minute windows, from which p50/p95/p99 are read.

Stream statistics (stats.counts.v1, from ingest and redaction) are added per (source,
domain, kind) to a tumbling one-minute and a hopping one-hour table; `stream_stats` reads
one window back for the Stats RPC and the /metrics collector.

Drift reports (drift.windows.v1, judged by retrieval) are kept newest per (source, domain,
model) in drift_latest; the Stats RPC shows them beside the counts of any window.

The stage is one object, `Inference`: its topics, tables, latency buffer and guard are its
fields, its agents and timers its methods; nothing lives at module level but constants.

The SLO guard (services/inference/guard/): every instance sends a sample per routed call
(and one per window for a call still in flight past the latency objective) and per
feedback event to guard.samples.v1, which has one partition, so the one instance
Kafka's group assigns it to counts every variant's windows in guard_windows and is the
only one that probes, judges and acts. If it dies, the partition, the table (from its
changelog) and the guard move to another instance at the rebalance; no second election.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import AsyncIterator
from typing import Any, TypeVar

import faust
from faust.types import TP

from services.inference.app import declare
from services.inference.audit.agents import QueryAudits
from services.inference.guard.inflight import InFlight
from services.inference.guard.runner import GuardRunner
from services.inference.guard.samples import GuardSample, table_keys
from services.inference.runtime import InferenceRuntime
from services.inference.settings import InferenceSettings
from services.inference.telemetry.drift import drift_key, merge, states
from services.inference.telemetry.latency import (
    LatencyBuffer,
    LatencyStats,
    QueryLatency,
    bucket_of,
    stats,
    table_key,
)
from services.inference.telemetry.streamstats import WindowCounts, rows, stat_key, window_instant
from shared.contract.codec import encode
from shared.contract.dlq import decode_or_dead_letter
from shared.contract.records import DriftReport, Feedback, GuardIncident, Record, StreamCounts
from shared.contract.topics import GUARD_SAMPLES
from shared.kafka import checkpoint
from shared.kafka.config_log import KafkaConfigLog
from shared.settings import KafkaSettings
from shared.worker import metrics
from shared.worker.topology import Topology

STAGE = "inference"
R = TypeVar("R", bound=Record)


class WindowedFeedback:
    """The FeedbackView over the tables: counts in the one-hour window around now."""

    def __init__(self, clicks: Any, skips: Any) -> None:
        self.clicks, self.skips = clicks, skips

    def counts(self, chunk_id: str) -> tuple[int, int]:
        return int(self.clicks[chunk_id].now()), int(self.skips[chunk_id].now())


class Inference:
    """One inference stage on one app: its topics and tables, the latencies its handlers
    buffer, the calls its guard watches, the runtime Faust starts beside the agents."""

    def __init__(self, app: faust.App, settings: InferenceSettings,
                 kafka: KafkaSettings) -> None:
        self.app, self.settings, self.kafka = app, settings, kafka
        t = declare(app, settings)
        self.topics = t
        self.feedback_topic, self.deadletters, self.latency_topic = (
            t.feedback, t.deadletters, t.latency)
        self.guard_samples_topic, self.incidents_topic = t.guard_samples, t.incidents
        self.clicks, self.skips, self.latencies = t.clicks, t.skips, t.latencies
        self.guard_windows = t.guard_windows
        self.stats_minute, self.stats_hour, self.drift_latest = (
            t.stats_minute, t.stats_hour, t.drift_latest)
        self.latency_buffer = LatencyBuffer(time.time)
        self.routed_calls = InFlight(settings.guard.p99_ms, settings.guard.window_s, time.time)
        self.audits = QueryAudits(app, t.audit_queries)
        self.guard_runner: GuardRunner | None = None  # the runtime's, once Faust built it
        self.runtime: InferenceRuntime | None = None
        # The Faust agents, once registered.
        self.count_feedback: Any = None
        self.count_latencies: Any = None
        self.count_guard_samples: Any = None
        self.count_stream_stats: Any = None
        self.keep_drift: Any = None

    def register(self) -> Topology:
        """Register the agents, timers, the query-audit timer and the runtime."""
        app, t = self.app, self.topics
        metrics.observe(app)  # consumer lag; the stage counters show on inference's /metrics
        if self.settings.mcp_port:
            # The MCP SDK imports for a second or more: here, before the event loop runs,
            # not inside it, where the watchdog counts a stall (the runtime imports it
            # again when it starts the face, from sys.modules).
            importlib.import_module("services.inference.api.mcpface")

        def agent(channel: Any, fun: Any) -> Any:  # named as the agent it makes
            return app.agent(channel, name=f"{__name__}.{fun.__name__.removesuffix('_of')}")(
                fun)
        self.count_feedback = agent(t.feedback, self.count_feedback_of)
        self.count_latencies = agent(t.latency, self.count_latencies_of)
        self.count_guard_samples = agent(t.guard_samples, self.count_guard_samples_of)
        self.count_stream_stats = agent(t.stats, self.count_stream_stats_of)
        self.keep_drift = agent(t.drift, self.keep_drift_of)
        app.timer(1.0)(self.send_latencies)
        app.timer(min(1.0, self.settings.guard.window_s / 4))(self.guard_tick)
        self.audits.register()
        app.service(self.runtime_class())
        return Topology("inference", app, self.settings, {
            "count_feedback": self.count_feedback, "count_latencies": self.count_latencies,
            "count_guard_samples": self.count_guard_samples,
            "count_stream_stats": self.count_stream_stats, "keep_drift": self.keep_drift},
            self)

    def runtime_class(self) -> type[InferenceRuntime]:
        """The runtime as a class Faust builds in its own loop when the app starts, bound to
        this stage."""
        stage = self

        class Runtime(InferenceRuntime):
            def __init__(self, **kwargs: Any) -> None:
                super().__init__(stage.settings, stage.kafka,
                                 feedback_sink=stage.publish_feedback,
                                 feedback_view=WindowedFeedback(stage.clicks, stage.skips),
                                 latency_sink=stage.latency_buffer.record,
                                 latency_view=stage.latency_stats,
                                 stats_view=stage.stream_stats, follow_config=True,
                                 after_serving=stage.audits.flush_on_stop,
                                 inflight=stage.routed_calls, **kwargs)
                # Every stage's counters (default registry) on inference's port too: in
                # one-process mode that one port shows them all.
                self.metrics.registry.register(metrics.Default())
                stage.runtime = self
                stage.guard_runner = GuardRunner(
                    stage.settings, self.live, self.engine, KafkaConfigLog(stage.kafka),
                    self.metrics, stage.guard_counts, stage.send_guard_sample,
                    stage.send_incident)
        return Runtime

    async def publish_feedback(self, chunk_id: str, kind: str, variant: str,
                               config_version: int) -> None:
        record = Feedback(chunk_id=chunk_id, kind=kind, at=time.time(), variant=variant,
                          config_version=config_version)
        await self.feedback_topic.send(key=chunk_id.encode(), value=encode(record))
        if variant:
            await self.send_guard_sample(GuardSample(
                variant=variant, config_version=config_version, kind=kind, at=record.at))

    async def decoded(self, stream: Any, record_type: type[R]) -> AsyncIterator[R]:
        """The records of one of this service's streams, each counted in; a record that
        does not decode is dead-lettered (with its reason) and skipped."""
        async for event in checkpoint.records(stream):
            metrics.received(STAGE, event.message.topic)
            record = await decode_or_dead_letter(record_type, event, self.deadletters, STAGE)
            if record is not None:
                yield record

    async def count_feedback_of(self, stream: Any) -> None:
        async for record in self.decoded(stream, Feedback):
            table = self.clicks if record.kind == "click" else self.skips
            table[record.chunk_id] += 1

    def latency_stats(self, method: str, at: float | None = None) -> LatencyStats:
        """Calls of `method` in the minute holding `at` (default: now), with percentiles."""
        view = self.latencies if at is None else self.latencies.clone(relative_to=at)
        if at is None:
            return stats(lambda b: int(view[table_key(method, b)].now()))
        return stats(lambda b: int(view[table_key(method, b)].value()))

    async def send_latencies(self) -> None:
        for record in self.latency_buffer.drain():
            await self.latency_topic.send(key=record.method.encode(), value=encode(record))
        # The guard's samples of routed calls come from their watches, not from the latency
        # records: a call still in flight, or one its caller gave up on, has none.
        for sample in self.routed_calls.drain():
            await self.send_guard_sample(sample)

    async def count_latencies_of(self, stream: Any) -> None:
        async for latency in self.decoded(stream, QueryLatency):
            if latency.error:
                continue
            self.latencies[table_key(latency.method, bucket_of(latency.latency_ms))] += 1

    async def send_guard_sample(self, sample: GuardSample) -> None:
        await self.guard_samples_topic.send(key=sample.variant.encode(), value=encode(sample))

    async def send_incident(self, incident: GuardIncident) -> None:
        await self.incidents_topic.send(key=incident.incident.encode(), value=encode(incident))

    async def count_guard_samples_of(self, stream: Any) -> None:
        async for sample in self.decoded(stream, GuardSample):
            for key in table_keys(sample):
                self.guard_windows[key] += 1

    def guard_counts(self, start: float) -> Any:
        """The window table's counters of the window that starts at `start`."""
        view = self.guard_windows.clone(relative_to=start)
        return lambda key: int(view[key].value())

    def runs_the_guard(self) -> bool:
        """Whether this instance holds guard.samples.v1's one partition (and the table)."""
        return TP(GUARD_SAMPLES.name, 0) in self.app.assignor.assigned_actives()

    async def guard_tick(self) -> None:
        if self.guard_runner is not None and self.runs_the_guard():
            await self.guard_runner.tick()

    async def count_stream_stats_of(self, stream: Any) -> None:
        async for record in self.decoded(stream, StreamCounts):
            for kind, n in record.counts.items():
                key = stat_key(record.source, record.domain, kind)
                self.stats_minute[key] += n
                self.stats_hour[key] += n

    async def keep_drift_of(self, stream: Any) -> None:
        async for report in self.decoded(stream, DriftReport):
            key = drift_key(report)
            self.drift_latest[key] = merge(self.drift_latest[key], report)

    def stream_stats(self, window: str, at: float, source: str = "",
                     domain: str = "") -> WindowCounts:
        """The counts of the minute (tumbling) or hour (hopping: the one that ends next, so
        the last hour up to now) holding `at` (0: now)."""
        table = self.stats_minute if window == "minute" else self.stats_hour
        retention = (self.settings.stats.minute_retention_s if window == "minute"
                     else self.settings.stats.hour_retention_s)
        ts = window_instant(at, time.time(), retention)
        # Faust reads a hopping table's newest window holding the instant; the earliest one
        # holding it is the window that started there.
        spec: Any = table.table.window
        start, _ = spec.earliest(ts)
        view = table.clone(relative_to=start)
        keys: Any = table.key_index_table  # Faust's WindowWrapperT stub does not declare it
        counts = ((key, int(view[key].value())) for key in list(keys.keys()))
        return WindowCounts(start, start + spec.size, rows(counts, source, domain),
                            states(list(self.drift_latest.items()), source, domain))


def build(on: faust.App, inference: InferenceSettings, kafka_settings: KafkaSettings,
          ) -> Topology:
    """Build an inference stage on `on` and register its agents, tables, timers, its
    query-audit timer and its runtime (the gRPC API beside them)."""
    return Inference(on, inference, kafka_settings).register()
