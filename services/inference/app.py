"""The inference Faust app, its settings, topics and tables.

Feedback: clicks and skips per chunk in hopping one-hour windows (5-minute steps).
Latency: finished calls counted per (method, log bucket) in tumbling one-minute windows.
Stream statistics: counts per (source, domain, kind) from stats.counts.v1, in tumbling
one-minute and hopping one-hour windows, their retention set by the settings.
Drift: the newest report and drift event per (source, domain, model) from drift.windows.v1.
SLO guard: per-variant samples from guard.samples.v1 (one partition) counted per
(variant, figure) in tumbling windows of guard_window_s; its incidents on guard.incidents.v1.
"""

from typing import Any

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

settings = InferenceSettings()
kafka = KafkaSettings()
app = make_app(INFERENCE_APP, kafka, settings.data_dir)

feedback_topic = topic(app, FEEDBACK)
deadletters = topic(app, DEADLETTER)
latency_topic = topic(app, QUERY_LATENCY)
audit_queries_topic = topic(app, AUDIT_QUERIES)  # services/inference/audit


def _window_table(name: str, partitions: int) -> Any:
    table = app.Table(name, default=int, partitions=partitions, key_type=str, value_type=int)
    return table.hopping(WINDOW_S, STEP_S, expires=WINDOW_S + STEP_S).relative_to_stream()


clicks = _window_table(CHUNK_CLICKS.name, CHUNK_CLICKS.partitions)
skips = _window_table(CHUNK_SKIPS.name, CHUNK_SKIPS.partitions)
latencies = app.Table(QUERY_LATENCIES.name, default=int, partitions=QUERY_LATENCIES.partitions,
                      key_type=str, value_type=int).tumbling(
    LATENCY_WINDOW_S, expires=2 * LATENCY_WINDOW_S).relative_to_stream()

stats_topic = topic(app, STREAM_STATS)
# key_index: the Stats RPC lists every (source, domain, kind) a window holds.
stats_minute: Any = app.Table(STATS_MINUTE.name, default=int, partitions=STATS_MINUTE.partitions,
                         key_type=str, value_type=int).tumbling(
    60.0, expires=settings.stats_minute_retention_s, key_index=True).relative_to_stream()
stats_hour: Any = app.Table(STATS_HOUR.name, default=int, partitions=STATS_HOUR.partitions,
                       key_type=str, value_type=int).hopping(
    3600.0, settings.stats_hour_step_s, expires=settings.stats_hour_retention_s,
    key_index=True).relative_to_stream()
drift_topic = topic(app, DRIFT_WINDOWS)
drift_latest: Any = app.Table(DRIFT_LATEST.name, default=str, partitions=DRIFT_LATEST.partitions,
                              key_type=str, value_type=str)
guard_samples_topic = topic(app, GUARD_SAMPLES)
incidents_topic = topic(app, GUARD_INCIDENTS)
guard_windows: Any = app.Table(GUARD_WINDOWS.name, default=int,
                               partitions=GUARD_WINDOWS.partitions, key_type=str,
                               value_type=int).tumbling(
    settings.guard_window_s, expires=4 * settings.guard_window_s).relative_to_stream()
# Faust names and builds the key indexes itself; the contract must name the same tables.
assert stats_minute.key_index_table.name == STATS_MINUTE_KEYS.name
assert stats_hour.key_index_table.name == STATS_HOUR_KEYS.name
