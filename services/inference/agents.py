"""Inference's Faust side: the feedback and latency agents, and the gRPC runtime beside them.

The topics and tables they use are declared in app.py.

Feedback (clicks and skips on cited chunks) arrives on feedback.v1 keyed by chunk id and
is counted in hopping one-hour windows (5-minute steps); the query engine reads the
window around now to boost or demote chunks. Bad records are dead-lettered.

Each instance counts the partitions it is assigned: with several inference instances a
chunk's feedback boosts only on the instance that owns its partition (see the note in
the README's inference section).

Finished calls' latencies go the same way: the handlers buffer them, a one-second timer
sends them to query.latency.v1 keyed by method, and an agent counts them per log-spaced
bucket in tumbling one-minute windows, from which p50/p95/p99 are read.
"""

from __future__ import annotations

import time
from typing import Any

from services.inference.app import (
    app,
    clicks,
    deadletters,
    feedback_topic,
    kafka,
    latencies,
    latency_topic,
    settings,
    skips,
)
from services.inference.runtime import InferenceRuntime
from services.inference.telemetry.latency import (
    LatencyBuffer,
    LatencyStats,
    QueryLatency,
    bucket_of,
    stats,
    table_key,
)
from shared.codec import encode
from shared.dlq import decode_or_dead_letter
from shared.records import Feedback

STAGE = "inference"
latency_buffer = LatencyBuffer(time.time)


class WindowedFeedback:
    """The FeedbackView over the tables: counts in the one-hour window around now."""

    def counts(self, chunk_id: str) -> tuple[int, int]:
        return int(clicks[chunk_id].now()), int(skips[chunk_id].now())


async def publish_feedback(chunk_id: str, kind: str) -> None:
    record = Feedback(chunk_id=chunk_id, kind=kind, at=time.time())
    await feedback_topic.send(key=chunk_id.encode(), value=encode(record))


@app.agent(feedback_topic)
async def count_feedback(stream: Any) -> None:
    async for event in stream.events():
        record = await decode_or_dead_letter(Feedback, event, deadletters, STAGE)
        if record is None:
            continue
        table = clicks if record.kind == "click" else skips
        table[record.chunk_id] += 1


def latency_stats(method: str, at: float | None = None) -> LatencyStats:
    """Calls of `method` in the minute holding `at` (default: now), with percentiles."""
    view = latencies if at is None else latencies.clone(relative_to=at)
    if at is None:
        return stats(lambda b: int(view[table_key(method, b)].now()))
    return stats(lambda b: int(view[table_key(method, b)].value()))


@app.timer(1.0)
async def send_latencies() -> None:
    for record in latency_buffer.drain():
        await latency_topic.send(key=record.method.encode(), value=encode(record))


@app.agent(latency_topic)
async def count_latencies(stream: Any) -> None:
    async for event in stream.events():
        latency = await decode_or_dead_letter(QueryLatency, event, deadletters, STAGE)
        if latency is None:
            continue
        latencies[table_key(latency.method, bucket_of(latency.latency_ms))] += 1


@app.service
class Runtime(InferenceRuntime):
    """Faust builds this in its own loop when the app starts; bound to this app's settings."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(settings, kafka, feedback_sink=publish_feedback,
                         feedback_view=WindowedFeedback(),
                         latency_sink=latency_buffer.record, latency_view=latency_stats,
                         **kwargs)
