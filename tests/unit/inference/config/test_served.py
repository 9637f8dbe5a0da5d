"""A configuration applied at run time reaches the next call: its top_k, its variant and
version on the response, a fresh answer-cache key, and the per-variant metrics."""

from __future__ import annotations

import asyncio
import json

import grpc

from services.inference.runtime import InferenceRuntime
from services.inference.settings import InferenceSettings
from services.inference.telemetry.latency import LatencyBuffer
from shared.rpc.streamrag.v1 import inference_pb2 as pb
from shared.settings import KafkaSettings
from tests.unit.inference.fakes import FakeSearch, WordEncoder
from tests.unit.inference.serving import CHUNKS, SERVING, serving, stub, until_status


def record(version: int, knobs: dict[str, object], variants: dict[str, object] | None = None,
           ) -> bytes:
    return json.dumps({"version": version, "author": "t", "at": 0.0, "knobs": knobs,
                       "variants": variants or {}}).encode()


def test_a_new_version_changes_the_next_query_and_the_cache_key() -> None:
    async def go() -> tuple[list[tuple[int, str, int]], list[str], InferenceRuntime]:
        out, keys = [], []
        async with serving(FakeSearch(CHUNKS), default_top_k=1) as (runtime, channel):
            for raw in (None, record(1, {"default_top_k": 2}), record(1, {"default_top_k": 3}),
                        b'{"version": 2, "knobs": {"default_top_k": 99999}}'):
                if raw is not None:
                    runtime.live.offer(raw)
                keys.append(runtime.cache.config_version)
                r = await stub(channel).Query(pb.QueryRequest(question="disk usage broker"))
                out.append((len(r.citations), r.variant, r.config_version))
            runtime.live.offer(record(2, {"default_top_k": 2}, {"stable": {"weight": 1}, "canary": {
                "weight": 1, "overrides": {"default_top_k": 1}}}))
            for i in range(12):
                r = await stub(channel).Retrieve(pb.RetrieveRequest(
                    question="disk usage broker", client_id=f"c{i}"))
                assert (len(r.chunks), r.config_version) == (
                    (1, 2) if r.variant == "canary" else (2, 2))
            return out, keys, runtime
    out, keys, runtime = asyncio.run(go())
    # Settings alone, then version 1; the stale version 1 and the bad version 2 are refused.
    assert out == [(1, "base", 0), (2, "base", 1), (2, "base", 1), (2, "base", 1)]
    assert keys[0] != keys[1] == keys[2] == keys[3]
    m = runtime.metrics
    assert m.sample("streamrag_inference_config_version") == 2
    assert m.sample("streamrag_inference_config_refused_total",
                    {"reason": "stale_version"}) == 1
    assert m.sample("streamrag_inference_config_refused_total",
                    {"reason": "invalid_field"}) == 1
    counts = {v: m.sample("streamrag_inference_variant_request_seconds_count",
                          {"method": "Retrieve", "variant": v}) or 0 for v in ("stable", "canary")}
    assert counts["stable"] + counts["canary"] == 12 and min(counts.values()) > 0


def test_stream_start_and_latency_records_carry_the_variant_and_version() -> None:
    buffer = LatencyBuffer(lambda: 0.0)

    async def go() -> pb.StreamStart:
        settings = InferenceSettings(grpc_port=0, grace_s=0)
        runtime = InferenceRuntime(settings, KafkaSettings(), search=FakeSearch(CHUNKS),
                                   encoder_factory=WordEncoder, latency_sink=buffer.record)
        await runtime.start()
        try:
            runtime.live.offer(record(3, {}, {"only": {"weight": 1}}))
            async with grpc.aio.insecure_channel(f"127.0.0.1:{runtime.port}") as channel:
                await until_status(channel, SERVING)
                events = [e async for e in stub(channel).StreamQuery(
                    pb.QueryRequest(question="disk full"))]
                info = await stub(channel).Info(pb.InfoRequest())
                assert (info.config_version, list(info.variants)) == (3, ["only"])
                await stub(channel).Embed(pb.EmbedRequest(texts=["disk"]))
                return events[0].start
        finally:
            await runtime.stop()
    start = asyncio.run(go())
    assert (start.config_version, start.variant) == (3, "only")
    assert [(r.method, r.variant, r.config_version) for r in buffer.drain()] == [
        ("StreamQuery", "only", 3), ("Embed", "", 0)]  # Embed is not a query: no variant


def test_search_knobs_reach_the_shards_per_variant() -> None:
    search = FakeSearch(CHUNKS)

    async def go() -> list[str]:
        async with serving(search) as (runtime, channel):
            runtime.live.offer(record(1, {"dense_weight": 2.0, "shard_timeout_s": 0.5}, {
                "a": {"weight": 1},
                "b": {"weight": 1, "overrides": {"hybrid": False}}}))
            variants = []
            for i in range(10):
                r = await stub(channel).Retrieve(pb.RetrieveRequest(
                    question="disk usage", client_id=f"c{i}"))
                variants.append(r.variant)
            return variants
    variants = asyncio.run(go())
    assert set(variants) == {"a", "b"}
    for variant, (query, timeout_s) in zip(variants, search.queries, strict=True):
        assert timeout_s <= 0.5
        if variant == "b":  # hybrid off: no text for BM25
            assert query.text == ""
        else:
            assert query.text == "disk usage" and query.fusion is not None
            assert query.fusion.dense_weight == 2.0


def test_a_call_no_shard_answers_is_its_variants_error_and_a_bad_question_is_not() -> None:
    buffer = LatencyBuffer(lambda: 0.0)

    async def go() -> list[grpc.StatusCode]:
        settings = InferenceSettings(grpc_port=0, grace_s=0, shard_timeout_s=0.05)
        runtime = InferenceRuntime(settings, KafkaSettings(),
                                   search=FakeSearch(CHUNKS, silent=frozenset(range(4))),
                                   encoder_factory=WordEncoder, latency_sink=buffer.record)
        await runtime.start()
        codes = []
        try:
            runtime.live.offer(record(4, {}, {"only": {"weight": 1}}))
            async with grpc.aio.insecure_channel(f"127.0.0.1:{runtime.port}") as channel:
                await until_status(channel, SERVING)
                for call in (stub(channel).Retrieve(pb.RetrieveRequest(question="disk")),
                             stub(channel).Query(pb.QueryRequest(question="disk")),
                             stub(channel).Query(pb.QueryRequest(question=""))):
                    try:
                        await call
                    except grpc.aio.AioRpcError as exc:
                        codes.append(exc.code())
            return codes
        finally:
            await runtime.stop()
    codes = asyncio.run(go())
    # grpc.aio starts each call when it is made: the three run at once, in any order.
    assert codes == [grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNAVAILABLE,
                     grpc.StatusCode.INVALID_ARGUMENT]
    assert sorted((r.method, r.variant, r.config_version, r.error) for r in buffer.drain()) == [
        ("Query", "only", 4, True), ("Retrieve", "only", 4, True)]
