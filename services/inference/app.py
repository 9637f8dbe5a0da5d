"""The inference service's app, topics and tables: `make` builds its own app (the
distributed deployment), `declare` its topics and tables on whichever app it is built on
(agents.build).

Feedback: clicks and skips per chunk in hopping one-hour windows (5-minute steps).
Latency: finished calls counted per (method, log bucket) in tumbling one-minute windows.
Stream statistics: counts per (source, domain, kind) from stats.counts.v1, in tumbling
one-minute and hopping one-hour windows, their retention set by the settings.
Drift: the newest report and drift event per (source, domain, model) from drift.windows.v1.
SLO guard: per-variant samples from guard.samples.v1 (one partition) counted per
(variant, figure) in tumbling windows of guard.window_s; its incidents on guard.incidents.v1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import faust

from services.inference.settings import InferenceSettings
from shared.contract.topics import (
    AUDIT_QUERIES,
    CHUNK_CLICKS,
    CHUNK_SKIPS,
    DEADLETTER,
    DRIFT_LATEST,
    DRIFT_WINDOWS,
    FEEDBACK,
    GUARD_INCIDENTS,
    GUARD_SAMPLES,
    GUARD_WINDOWS,
    INFERENCE_APP,
    QUERY_LATENCIES,
    QUERY_LATENCY,
    STATS_HOUR,
    STATS_HOUR_KEYS,
    STATS_MINUTE,
    STATS_MINUTE_KEYS,
    STREAM_STATS,
)
from shared.kafka.app import make_app, topic
from shared.settings import KafkaSettings

WINDOW_S, STEP_S = 3600.0, 300.0
LATENCY_WINDOW_S = 60.0


def make(settings: InferenceSettings, kafka: KafkaSettings) -> faust.App:
    return make_app(INFERENCE_APP, kafka, settings.data_dir)


@dataclass(frozen=True)
class Topics:
    feedback: Any
    deadletters: Any
    latency: Any
    audit_queries: Any  # services/inference/audit
    stats: Any
    drift: Any
    guard_samples: Any
    incidents: Any
    clicks: Any
    skips: Any
    latencies: Any
    # key_index: the Stats RPC lists every (source, domain, kind) a window holds.
    stats_minute: Any
    stats_hour: Any
    drift_latest: Any
    guard_windows: Any


def declare(app: faust.App, settings: InferenceSettings) -> Topics:
    def window_table(name: str, partitions: int) -> Any:
        table = app.Table(name, default=int, partitions=partitions, key_type=str,
                          value_type=int)
        return table.hopping(WINDOW_S, STEP_S, expires=WINDOW_S + STEP_S).relative_to_stream()

    def counter(spec: Any) -> Any:
        return app.Table(spec.name, default=int, partitions=spec.partitions, key_type=str,
                         value_type=int)

    stats_minute = counter(STATS_MINUTE).tumbling(
        60.0, expires=settings.stats.minute_retention_s, key_index=True).relative_to_stream()
    stats_hour = counter(STATS_HOUR).hopping(
        3600.0, settings.stats.hour_step_s, expires=settings.stats.hour_retention_s,
        key_index=True).relative_to_stream()
    # Faust names and builds the key indexes itself; the contract must name the same tables.
    assert stats_minute.key_index_table.name == STATS_MINUTE_KEYS.name
    assert stats_hour.key_index_table.name == STATS_HOUR_KEYS.name
    return Topics(
        feedback=topic(app, FEEDBACK), deadletters=topic(app, DEADLETTER),
        latency=topic(app, QUERY_LATENCY), audit_queries=topic(app, AUDIT_QUERIES),
        stats=topic(app, STREAM_STATS), drift=topic(app, DRIFT_WINDOWS),
        guard_samples=topic(app, GUARD_SAMPLES), incidents=topic(app, GUARD_INCIDENTS),
        clicks=window_table(CHUNK_CLICKS.name, CHUNK_CLICKS.partitions),
        skips=window_table(CHUNK_SKIPS.name, CHUNK_SKIPS.partitions),
        latencies=counter(QUERY_LATENCIES).tumbling(
            LATENCY_WINDOW_S, expires=2 * LATENCY_WINDOW_S).relative_to_stream(),
        stats_minute=stats_minute, stats_hour=stats_hour,
        drift_latest=app.Table(DRIFT_LATEST.name, default=str,
                               partitions=DRIFT_LATEST.partitions, key_type=str,
                               value_type=str),
        guard_windows=counter(GUARD_WINDOWS).tumbling(
            settings.guard.window_s, expires=4 * settings.guard.window_s).relative_to_stream())
