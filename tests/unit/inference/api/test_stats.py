"""The Stats RPC over a fake stats view: rows and window bounds, and precise statuses for
arguments it cannot answer; the same windows on /metrics."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import grpc
import pytest

from services.inference.runtime import InferenceRuntime
from services.inference.settings import InferenceSettings
from services.inference.telemetry.streamstats import StatRow, WindowCounts, window_instant
from shared.rpc.streamrag.v1 import inference_pb2 as pb
from shared.settings import KafkaSettings
from tests.unit.inference.fakes import FakeSearch, WordEncoder
from tests.unit.inference.serving import CHUNKS, stub

NOW = 1_800_000_000.0


class View:
    """What the tables would answer; remembers each call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, float, str, str]] = []

    def __call__(self, window: str, at: float, source: str, domain: str) -> WindowCounts:
        self.calls.append((window, at, source, domain))
        ts = window_instant(at, NOW, 60.0 if window == "minute" else 3600.0)
        size = 60.0 if window == "minute" else 3600.0
        start = ts - ts % size
        rows = [StatRow("crm", "sales", "new", 3), StatRow("crm", "sales", "pii.PERSON", 2)]
        return WindowCounts(start, start + size, [r for r in rows if source in ("", r.source)])


@asynccontextmanager
async def serving(view: View | None) -> AsyncIterator[tuple[InferenceRuntime, Any]]:
    settings = InferenceSettings(grpc_port=0, grace_s=0.2)
    runtime = InferenceRuntime(settings, KafkaSettings(), search=FakeSearch(CHUNKS),
                               encoder_factory=WordEncoder, stats_view=view)
    await runtime.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{runtime.port}") as channel:
            yield runtime, channel
    finally:
        await runtime.stop()


def call(request: pb.StatsRequest, view: View | None) -> pb.StatsResponse | grpc.aio.AioRpcError:
    async def go() -> pb.StatsResponse | grpc.aio.AioRpcError:
        async with serving(view) as (_, channel):
            try:
                return await stub(channel).Stats(request)
            except grpc.aio.AioRpcError as exc:
                return exc
    return asyncio.run(go())


def test_stats_answers_the_window_s_counts_and_bounds() -> None:
    view = View()
    resp = call(pb.StatsRequest(window=pb.STATS_WINDOW_HOUR, source="crm", at=NOW - 10), view)
    assert isinstance(resp, pb.StatsResponse)
    assert view.calls == [("hour", NOW - 10, "crm", "")]
    assert (resp.window, resp.window_start, resp.window_end) == (
        pb.STATS_WINDOW_HOUR, 1_799_996_400.0, 1_800_000_000.0)
    assert [(c.source, c.domain, c.kind, c.count) for c in resp.counts] == [
        ("crm", "sales", "new", 3), ("crm", "sales", "pii.PERSON", 2)]


@pytest.mark.parametrize(("request_", "code", "field"), [
    (pb.StatsRequest(), grpc.StatusCode.INVALID_ARGUMENT, "window"),
    (pb.StatsRequest(window=7), grpc.StatusCode.INVALID_ARGUMENT, "window"),
    (pb.StatsRequest(window=pb.STATS_WINDOW_MINUTE, source="s" * 513),
     grpc.StatusCode.INVALID_ARGUMENT, "source"),
    (pb.StatsRequest(window=pb.STATS_WINDOW_MINUTE, at=NOW + 3600),
     grpc.StatusCode.INVALID_ARGUMENT, "at"),
    (pb.StatsRequest(window=pb.STATS_WINDOW_MINUTE, at=NOW - 61),
     grpc.StatusCode.OUT_OF_RANGE, "at"),
])
def test_arguments_it_cannot_answer_get_a_precise_status_naming_the_field(
        request_: pb.StatsRequest, code: grpc.StatusCode, field: str) -> None:
    exc = call(request_, View())
    assert isinstance(exc, grpc.aio.AioRpcError)
    assert exc.code() == code, exc.details()
    assert dict(exc.trailing_metadata())["streamrag-field"] == field


def test_without_stats_tables_the_call_is_unavailable() -> None:
    exc = call(pb.StatsRequest(window=pb.STATS_WINDOW_MINUTE), None)
    assert isinstance(exc, grpc.aio.AioRpcError)
    assert exc.code() == grpc.StatusCode.UNAVAILABLE


def test_metrics_show_the_current_windows() -> None:
    async def go() -> float:
        async with serving(View()) as (runtime, _):
            return runtime.metrics.sample("streamrag_stream_window_count", {
                "window": "minute", "source": "crm", "domain": "sales", "kind": "pii.PERSON"})
    assert asyncio.run(go()) == 2.0
