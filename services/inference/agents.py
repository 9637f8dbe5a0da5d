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

The SLO guard (services/inference/guard/): every instance sends a sample per routed call
(and one per window for a call still in flight past the latency objective) and per
feedback event to guard.samples.v1, which has one partition, so the one instance
Kafka's group assigns it to counts every variant's windows in guard_windows and is the
only one that probes, judges and acts. If it dies, the partition, the table (from its
changelog) and the guard move to another instance at the rebalance; no second election.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any, TypeVar

import faust
from faust.types import TP

from services.inference.app import declare
from services.inference.audit import agents as _audit  # E4: audit timer, flush on stop
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
latency_buffer = LatencyBuffer(time.time)
# What build() wired this module's agents to: one topology per process.
app: faust.App
settings: InferenceSettings
kafka: KafkaSettings
feedback_topic: Any
deadletters: Any
latency_topic: Any
guard_samples_topic: Any
incidents_topic: Any
clicks: Any
skips: Any
latencies: Any
stats_minute: Any
stats_hour: Any
drift_latest: Any
guard_windows: Any
routed_calls: InFlight
count_feedback: Any  # the Faust agents
count_latencies: Any
count_guard_samples: Any
count_stream_stats: Any
keep_drift: Any


def build(on: faust.App, inference: InferenceSettings, kafka_settings: KafkaSettings,
          ) -> Topology:
    """Register inference's agents, tables and timers, its query-audit timer and its
    Runtime (the gRPC API beside them) on `on`."""
    global app, settings, kafka, feedback_topic, deadletters, latency_topic
    global guard_samples_topic, incidents_topic, clicks, skips, latencies, stats_minute
    global stats_hour, drift_latest, guard_windows, routed_calls, count_feedback
    global count_latencies, count_guard_samples, count_stream_stats, keep_drift
    app, settings, kafka = on, inference, kafka_settings
    t = declare(app, settings)
    feedback_topic, deadletters, latency_topic = t.feedback, t.deadletters, t.latency
    guard_samples_topic, incidents_topic = t.guard_samples, t.incidents
    clicks, skips, latencies, guard_windows = t.clicks, t.skips, t.latencies, t.guard_windows
    stats_minute, stats_hour, drift_latest = t.stats_minute, t.stats_hour, t.drift_latest
    routed_calls = InFlight(settings.guard.p99_ms, settings.guard.window_s, time.time)
    metrics.observe(app)  # consumer lag; the stage counters show on inference's own /metrics

    def agent(channel: Any, fun: Any) -> Any:  # named as the agent it makes (count_feedback)
        return app.agent(channel, name=f"{__name__}.{fun.__name__.removesuffix('_of')}")(fun)
    count_feedback = agent(t.feedback, count_feedback_of)
    count_latencies = agent(t.latency, count_latencies_of)
    count_guard_samples = agent(t.guard_samples, count_guard_samples_of)
    count_stream_stats = agent(t.stats, count_stream_stats_of)
    keep_drift = agent(t.drift, keep_drift_of)
    app.timer(1.0)(send_latencies)
    app.timer(min(1.0, settings.guard.window_s / 4))(guard_tick)
    _audit.build(app, t.audit_queries)
    app.service(Runtime)
    return Topology("inference", app, settings, {
        "count_feedback": count_feedback, "count_latencies": count_latencies,
        "count_guard_samples": count_guard_samples, "count_stream_stats": count_stream_stats,
        "keep_drift": keep_drift})


class WindowedFeedback:
    """The FeedbackView over the tables: counts in the one-hour window around now."""

    def counts(self, chunk_id: str) -> tuple[int, int]:
        return int(clicks[chunk_id].now()), int(skips[chunk_id].now())


async def publish_feedback(chunk_id: str, kind: str, variant: str, config_version: int,
                           ) -> None:
    record = Feedback(chunk_id=chunk_id, kind=kind, at=time.time(), variant=variant,
                      config_version=config_version)
    await feedback_topic.send(key=chunk_id.encode(), value=encode(record))
    if variant:
        await send_guard_sample(GuardSample(variant=variant, config_version=config_version,
                                            kind=kind, at=record.at))


R = TypeVar("R", bound=Record)


async def decoded(stream: Any, record_type: type[R]) -> AsyncIterator[R]:
    """The records of one of this service's streams, each counted in; a record that does not
    decode is dead-lettered (with its reason) and skipped."""
    async for event in checkpoint.records(stream):
        metrics.received(STAGE, event.message.topic)
        record = await decode_or_dead_letter(record_type, event, deadletters, STAGE)
        if record is not None:
            yield record


async def count_feedback_of(stream: Any) -> None:
    async for record in decoded(stream, Feedback):
        table = clicks if record.kind == "click" else skips
        table[record.chunk_id] += 1


def latency_stats(method: str, at: float | None = None) -> LatencyStats:
    """Calls of `method` in the minute holding `at` (default: now), with percentiles."""
    view = latencies if at is None else latencies.clone(relative_to=at)
    if at is None:
        return stats(lambda b: int(view[table_key(method, b)].now()))
    return stats(lambda b: int(view[table_key(method, b)].value()))


async def send_latencies() -> None:
    for record in latency_buffer.drain():
        await latency_topic.send(key=record.method.encode(), value=encode(record))
    # The guard's samples of routed calls come from their watches, not from the latency
    # records: a call still in flight, or one its caller gave up on, has no latency record.
    for sample in routed_calls.drain():
        await send_guard_sample(sample)


async def count_latencies_of(stream: Any) -> None:
    async for latency in decoded(stream, QueryLatency):
        if latency.error:
            continue
        latencies[table_key(latency.method, bucket_of(latency.latency_ms))] += 1


async def send_guard_sample(sample: GuardSample) -> None:
    await guard_samples_topic.send(key=sample.variant.encode(), value=encode(sample))


async def send_incident(incident: GuardIncident) -> None:
    await incidents_topic.send(key=incident.incident.encode(), value=encode(incident))


async def count_guard_samples_of(stream: Any) -> None:
    async for sample in decoded(stream, GuardSample):
        for key in table_keys(sample):
            guard_windows[key] += 1


def guard_counts(start: float) -> Any:
    """The window table's counters of the window that starts at `start`."""
    view = guard_windows.clone(relative_to=start)
    return lambda key: int(view[key].value())


def runs_the_guard() -> bool:
    """Whether this instance holds guard.samples.v1's one partition (and so the table)."""
    return TP(GUARD_SAMPLES.name, 0) in app.assignor.assigned_actives()


guard_runner: list[GuardRunner] = []  # the Runtime's, once Faust has built it


async def guard_tick() -> None:
    if guard_runner and runs_the_guard():
        await guard_runner[0].tick()


async def count_stream_stats_of(stream: Any) -> None:
    async for record in decoded(stream, StreamCounts):
        for kind, n in record.counts.items():
            key = stat_key(record.source, record.domain, kind)
            stats_minute[key] += n
            stats_hour[key] += n


async def keep_drift_of(stream: Any) -> None:
    async for report in decoded(stream, DriftReport):
        key = drift_key(report)
        drift_latest[key] = merge(drift_latest[key], report)


def stream_stats(window: str, at: float, source: str = "", domain: str = "") -> WindowCounts:
    """The counts of the minute (tumbling) or hour (hopping: the one that ends next, so
    the last hour up to now) holding `at` (0: now)."""
    table = stats_minute if window == "minute" else stats_hour
    retention = (settings.stats.minute_retention_s if window == "minute"
                 else settings.stats.hour_retention_s)
    ts = window_instant(at, time.time(), retention)
    # Faust reads a hopping table's newest window holding the instant; the earliest one
    # holding it is the window that started there.
    spec: Any = table.table.window
    start, _ = spec.earliest(ts)
    view = table.clone(relative_to=start)
    keys: Any = table.key_index_table  # Faust's WindowWrapperT stub does not declare it
    counts = ((key, int(view[key].value())) for key in list(keys.keys()))
    return WindowCounts(start, start + spec.size, rows(counts, source, domain),
                        states(list(drift_latest.items()), source, domain))


class Runtime(InferenceRuntime):
    """Faust builds this in its own loop when the app starts; bound to this app's settings."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(settings, kafka, feedback_sink=publish_feedback,
                         feedback_view=WindowedFeedback(),
                         latency_sink=latency_buffer.record, latency_view=latency_stats,
                         stats_view=stream_stats, follow_config=True,
                         after_serving=_audit.flush_on_stop, inflight=routed_calls, **kwargs)
        # Every stage's counters (default registry) on inference's port too: in one-process
        # mode that one port shows them all.
        self.metrics.registry.register(metrics.Default())
        guard_runner[:] = [GuardRunner(settings, self.live, self.engine, KafkaConfigLog(kafka),
                                       self.metrics, guard_counts, send_guard_sample,
                                       send_incident)]
