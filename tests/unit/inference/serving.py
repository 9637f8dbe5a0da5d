"""The inference runtime in process over fakes, with a gRPC channel to it: what the API,
status, latency, vector-cache and decode tests share."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.inference.encoding import TextEncoder
from services.inference.runtime import InferenceRuntime
from services.inference.settings import InferenceSettings
from shared.rpc.streamrag.v1 import inference_pb2 as pb
from shared.rpc.streamrag.v1 import inference_pb2_grpc as pb_grpc
from shared.settings import KafkaSettings
from tests.support.polling import eventually_async
from tests.unit.inference.fakes import FakeSearch, GatedEncoder, WordEncoder, hit

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
CHUNKS = {
    0: [hit("c-disk", 0.9, "Disk usage on the broker reached ninety percent. Nobody noticed.",
            doc_id="incident-7")],
    1: [hit("c-lunch", 0.4, "The team ordered lunch at noon. Pizza was late again.")],
    2: [hit("c-fix", 0.8, "Rotating the broker logs freed the disk. Usage fell to forty percent.")],
}


@asynccontextmanager
async def serving(search: FakeSearch, factory: Callable[[], TextEncoder] = WordEncoder,
                  wait: bool = True, runtime_kw: dict[str, Any] | None = None,
                  **kw: Any) -> AsyncIterator[tuple[InferenceRuntime, Any]]:
    """A started runtime over `search` and a channel to it; `kw` are InferenceSettings,
    `runtime_kw` the runtime's own arguments (feedback_sink, ...)."""
    settings = InferenceSettings(grpc_port=0, grace_s=0.2, **kw)
    runtime = InferenceRuntime(settings, KafkaSettings(), search=search, encoder_factory=factory,
                               **(runtime_kw or {}))
    await runtime.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{runtime.port}") as channel:
            if wait:
                await until_status(channel, SERVING)
            yield runtime, channel
    finally:
        await runtime.stop()


@asynccontextmanager
async def full_encoder_queue(search: FakeSearch) -> AsyncIterator[
        tuple[InferenceRuntime, Any, Callable[[], Awaitable[list[Any]]]]]:
    """A server whose encoder queue (capacity 2) is full: one Embed call runs, blocked in
    the encoder, and two wait. Yields the runtime, a channel and `release`, which lets the
    encoder go and returns the three Embed replies; leaving releases it in any case."""
    encoder = GatedEncoder()
    async with serving(search, lambda: encoder, queue_capacity=2,
                       embed_max_batch=1) as (runtime, channel):
        calls = [asyncio.ensure_future(stub(channel).Embed(pb.EmbedRequest(texts=[f"t{i}"])))
                 for i in range(3)]

        async def release() -> list[Any]:
            encoder.gate.set()
            return list(await asyncio.gather(*calls))
        await eventually_async(lambda: len(runtime.engine.embedder.queue) >= 2,
                               "two requests waiting in the embed queue")
        try:
            yield runtime, channel, release
        finally:
            await release()


async def health(channel: Any, service: str = "streamrag.v1.Inference") -> int:
    stub = health_pb2_grpc.HealthStub(channel)
    return (await stub.Check(health_pb2.HealthCheckRequest(service=service))).status


async def until_status(channel: Any, status: int, timeout_s: float = 5.0) -> None:
    async def reached() -> bool:
        return await health(channel) == status
    await eventually_async(reached, f"health status {status}", timeout_s, 0.02)


def stub(channel: Any) -> pb_grpc.InferenceStub:
    return pb_grpc.InferenceStub(channel)


def without_receipts(citations: Any) -> list[pb.Citation]:
    """Citations with their feedback receipts cleared, after checking each has one: two
    calls' receipts differ once the clock passes a second (the expiry is in each)."""
    out = []
    for c in citations:
        assert c.feedback_receipt.startswith("v1.")
        copy = pb.Citation()
        copy.CopyFrom(c)
        copy.ClearField("feedback_receipt")
        out.append(copy)
    return out
