"""The tumbling one-minute latency table: buckets, percentiles, the agent and the handlers' feed."""

from __future__ import annotations

import asyncio
import json
import math
from unittest.mock import AsyncMock, patch

import grpc
import pytest

from services.inference.runtime import InferenceRuntime
from services.inference.settings import InferenceSettings
from services.inference.telemetry.latency import (
    LatencyBuffer,
    LatencyStats,
    QueryLatency,
    bucket_of,
    stats,
    upper_edge,
)
from shared.rpc.streamrag.v1 import inference_pb2 as pb
from shared.settings import KafkaSettings
from tests.support import built
from tests.unit.inference.fakes import FakeSearch, WordEncoder
from tests.unit.inference.serving import CHUNKS, SERVING, stub, until_status

agents = built.stage("inference")  # a stage of its own

# The middle of a fixed minute: the window is chosen by the events' timestamps, never
# by the wall clock, so the test cannot straddle a window boundary.
T0 = 1_700_000_010.0


@pytest.mark.parametrize(("ms", "bucket"), [(0.0, 0), (1.0, 0), (1.01, 1), (2.0, 4),
                                            (2.01, 5), (10.0, 14), (1e9, 71)])
def test_buckets_are_quarter_doublings(ms: float, bucket: int) -> None:
    assert bucket_of(ms) == bucket


def test_a_percentile_is_the_smallest_edge_at_or_above_the_latency() -> None:
    for ms in (1.5, 7.0, 33.3, 250.0, 4000.0):
        edge = upper_edge(bucket_of(ms))
        assert ms <= edge < ms * 2 ** 0.25


def test_stats_use_nearest_rank() -> None:
    counts = {bucket_of(10): 80, bucket_of(200): 15, bucket_of(3000): 5}
    got = stats(lambda b: counts.get(b, 0))
    assert got.count == 100
    assert [round(v, 2) for v in (got.p50_ms, got.p95_ms, got.p99_ms)] == [11.31, 215.27, 3444.31]
    assert stats(lambda b: 0) == LatencyStats(0, 0.0, 0.0, 0.0)


def _record(method: str, ms: float, at: float = T0) -> bytes:
    return QueryLatency(method=method, latency_ms=ms, at=at).model_dump_json().encode()


async def _drive(values: list[tuple[bytes, float]]) -> tuple[
        LatencyStats, LatencyStats, LatencyStats, AsyncMock]:
    agents.app.finalize()
    agents.app.flow_control.resume()
    dead = AsyncMock()
    with patch.object(agents.deadletters, "send", dead):
        async with agents.count_latencies.test_context() as agent:
            for value, ts in values:
                await agent.put(value=value, key=b"m", timestamp=ts)
            return (agents.latency_stats("Query", at=T0), agents.latency_stats("Embed", at=T0),
                    agents.latency_stats("Query", at=T0 + 60.0), dead)


def test_agent_counts_each_method_per_minute_and_dead_letters_bad_records() -> None:
    values = ([(_record("Query", 10.0), T0)] * 80 + [(_record("Query", 200.0), T0)] * 15
              + [(_record("Query", 3000.0), T0)] * 5 + [(_record("Embed", 40.0), T0)] * 3
              + [(_record("Query", 5.0, T0 + 60), T0 + 60.0)] * 2
              + [(b'{"method": "Query", "latency_ms": -1, "at": 1}', T0)])
    query, embed, next_minute, dead = asyncio.run(_drive(values))
    assert query.count == 100  # the next minute's two and the bad one are not here
    percentiles = (query.p50_ms, query.p95_ms, query.p99_ms)
    assert [round(v, 2) for v in percentiles] == [11.31, 215.27, 3444.31]
    p = round(upper_edge(bucket_of(40.0)), 2)
    assert (embed.count, round(embed.p50_ms, 2), round(embed.p99_ms, 2)) == (3, p, p)
    assert (next_minute.count, round(next_minute.p99_ms, 2)) == (2, round(upper_edge(10), 2))
    letter = json.loads(dead.await_args.kwargs["value"])
    assert (letter["stage"], letter["field"]) == ("inference", "latency_ms")


def test_handlers_feed_finished_calls_to_the_buffer_and_info_shows_the_view() -> None:
    buffer = LatencyBuffer(lambda: T0)

    def view(method: str) -> LatencyStats:
        if method == "Retrieve":
            return LatencyStats(4, 9.5, 9.5, 13.5)
        return LatencyStats(7, 11.3, 215.3, 3444.3) if method == "Query" else stats(lambda b: 0)

    async def go() -> pb.InfoResponse:
        settings = InferenceSettings(grpc_port=0, grace_s=0)
        runtime = InferenceRuntime(settings, KafkaSettings(), search=FakeSearch(CHUNKS),
                                   encoder_factory=WordEncoder, latency_sink=buffer.record,
                                   latency_view=view)
        await runtime.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{runtime.port}") as channel:
                await until_status(channel, SERVING)
                await stub(channel).Query(pb.QueryRequest(question="disk full"))
                await stub(channel).Retrieve(pb.RetrieveRequest(question="disk full"))
                await stub(channel).Embed(pb.EmbedRequest(texts=["disk"]))
                with pytest.raises(grpc.aio.AioRpcError):  # failures are not latencies
                    await stub(channel).Query(pb.QueryRequest(question=""))
                return await stub(channel).Info(pb.InfoRequest())
        finally:
            await runtime.stop()
    info = asyncio.run(go())
    assert [(m.method, m.count, m.p50_ms, m.p95_ms, m.p99_ms) for m in info.latency] == [
        ("Query", 7, 11.3, 215.3, 3444.3), ("Retrieve", 4, 9.5, 9.5, 13.5),
    ]  # methods without calls are left out
    drained = buffer.drain()
    assert [r.method for r in drained] == ["Query", "Retrieve", "Embed"]
    assert all(r.latency_ms > 0 and r.at == T0 for r in drained)
    assert buffer.drain() == []
    assert not math.isnan(drained[0].latency_ms)
