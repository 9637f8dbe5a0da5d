"""The inference Faust app, its settings, topics and tables.

Feedback: clicks and skips per chunk in hopping one-hour windows (5-minute steps).
Latency: finished calls counted per (method, log bucket) in tumbling one-minute windows.
"""

from typing import Any

from services.inference.settings import InferenceSettings
from shared.faust_app import make_app, topic
from shared.settings import KafkaSettings
from shared.topics import (
    CHUNK_CLICKS,
    CHUNK_SKIPS,
    DEADLETTER,
    FEEDBACK,
    INFERENCE_APP,
    QUERY_LATENCIES,
    QUERY_LATENCY,
)

WINDOW_S, STEP_S = 3600.0, 300.0
LATENCY_WINDOW_S = 60.0

settings = InferenceSettings()
kafka = KafkaSettings()
app = make_app(INFERENCE_APP, kafka, settings.data_dir)

feedback_topic = topic(app, FEEDBACK)
deadletters = topic(app, DEADLETTER)
latency_topic = topic(app, QUERY_LATENCY)


def _window_table(name: str, partitions: int) -> Any:
    table = app.Table(name, default=int, partitions=partitions, key_type=str, value_type=int)
    return table.hopping(WINDOW_S, STEP_S, expires=WINDOW_S + STEP_S).relative_to_stream()


clicks = _window_table(CHUNK_CLICKS.name, CHUNK_CLICKS.partitions)
skips = _window_table(CHUNK_SKIPS.name, CHUNK_SKIPS.partitions)
latencies = app.Table(QUERY_LATENCIES.name, default=int, partitions=QUERY_LATENCIES.partitions,
                      key_type=str, value_type=int).tumbling(
    LATENCY_WINDOW_S, expires=2 * LATENCY_WINDOW_S).relative_to_stream()
