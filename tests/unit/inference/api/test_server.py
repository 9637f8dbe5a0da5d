"""The gRPC API in process, over fakes: status codes, stream order, deadlines, health."""

from __future__ import annotations

import asyncio
import threading
import time

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from services.inference.encoding import TextEncoder
from shared.rpc.streamrag.v1 import inference_pb2 as pb
from tests.support.polling import eventually_async
from tests.unit.inference.fakes import FakeSearch, WordEncoder
from tests.unit.inference.serving import (
    CHUNKS,
    NOT_SERVING,
    SERVING,
    health,
    serving,
    stub,
    until_status,
    without_receipts,
)

BAD_REQUESTS = [
    (pb.QueryRequest(question=""), "question"),
    (pb.QueryRequest(question="x" * 4001), "question"),
    (pb.QueryRequest(question="q", top_k=-1), "top_k"),
    (pb.QueryRequest(question="q", top_k=51), "top_k"),
    (pb.QueryRequest(question="q", since="last tuesday"), "since"),
    (pb.QueryRequest(question="q", until="2024-01-01T00:00:00"), "until"),
    (pb.QueryRequest(question="q", since="1h", until="2h"), "until"),
    (pb.QueryRequest(question="q", temperature=3.0), "temperature"),
    (pb.QueryRequest(question="q", max_new_tokens=-1), "max_new_tokens"),
    (pb.QueryRequest(question="q", stop=["a", "b", "c", "d", "e"]), "stop"),
]


@pytest.mark.parametrize("streaming", [False, True], ids=["Query", "StreamQuery"])
def test_bad_arguments_are_invalid_argument_naming_the_field(streaming: bool) -> None:
    async def go() -> None:
        search = FakeSearch(CHUNKS)
        async with serving(search) as (_, channel):
            for request, field in BAD_REQUESTS:
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    if streaming:
                        [m async for m in stub(channel).StreamQuery(request)]
                    else:
                        await stub(channel).Query(request)
                assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, request
                assert err.value.details().startswith(f"invalid {field} "), err.value.details()
                assert ("streamrag-field", field) in tuple(err.value.trailing_metadata())
        assert search.queries == []  # refused before any scatter
    asyncio.run(go())


def test_query_answers_extractively_with_numbered_citations() -> None:
    async def go() -> pb.QueryResponse:
        search = FakeSearch(CHUNKS)
        async with serving(search, answer_sentences=2) as (_, channel):
            response = await stub(channel).Query(pb.QueryRequest(
                question="What freed the broker disk?", top_k=3, since="1h", domain="ops"))
        query, timeout_s = search.queries[0]
        assert (query.top_k, query.domain, query.source, query.model_id) == (
            3, "ops", None, "fake/words")
        assert query.since == pytest.approx(time.time() - 3600, abs=5)
        assert timeout_s == pytest.approx(2.0)
        return response
    response = asyncio.run(go())
    assert [c.chunk_id for c in response.citations] == ["c-disk", "c-fix", "c-lunch"]
    assert response.answer.startswith("Rotating the broker logs freed the disk. [2]")
    assert response.answer.count("[") == 2 and "[3]" not in response.answer
    assert (response.answer_mode, response.partial, list(response.missing_shards)) == (
        "extractive", False, [])
    c = response.citations[0]
    assert (c.doc_id, c.event_time_iso, c.version) == ("incident-7", "2023-11-14T22:13:20Z", 1)
    assert response.timings.total_ms >= response.timings.retrieval_ms > 0
    assert response.finish_reason == "stop" and response.usage.unit == "words"


def test_stream_sends_citations_then_deltas_then_end() -> None:
    async def go() -> tuple[list[pb.StreamQueryResponse], pb.QueryResponse]:
        async with serving(FakeSearch(CHUNKS)) as (_, channel):
            request = pb.QueryRequest(question="disk usage on the broker")
            messages = [m async for m in stub(channel).StreamQuery(request)]
            return messages, await stub(channel).Query(request)
    messages, unary = asyncio.run(go())
    kinds = [m.WhichOneof("event") for m in messages]
    assert kinds[0] == "start" and kinds[-1] == "end"
    assert set(kinds[1:-1]) == {"delta"} and 1 <= len(kinds) - 2 <= 3  # answer_sentences=3
    assert without_receipts(messages[0].start.citations) == without_receipts(unary.citations)
    assert "".join(m.delta for m in messages[1:-1]) == unary.answer
    assert messages[-1].end.finish_reason == "stop"


def test_stream_honours_stop_and_word_cap() -> None:
    async def go() -> list[pb.StreamQueryResponse]:
        async with serving(FakeSearch(CHUNKS)) as (_, channel):
            request = pb.QueryRequest(question="disk usage", max_new_tokens=4)
            return [m async for m in stub(channel).StreamQuery(request)]
    messages = asyncio.run(go())
    text = "".join(m.delta for m in messages if m.WhichOneof("event") == "delta")
    assert len(text.split()) == 4 and messages[-1].end.finish_reason == "length"
    assert messages[-1].end.usage.completion_tokens == 4


def test_partial_result_names_missing_and_failed_shards() -> None:
    async def go() -> pb.QueryResponse:
        search = FakeSearch(CHUNKS, silent=frozenset({1, 3}), failing={0: "model_mismatch"})
        async with serving(search, shard_timeout_s=0.2) as (_, channel):
            return await stub(channel).Query(pb.QueryRequest(question="disk"))
    response = asyncio.run(go())
    assert response.partial and list(response.missing_shards) == [0, 1, 3]
    assert dict(response.shard_errors) == {0: "model_mismatch"}
    assert [c.chunk_id for c in response.citations] == ["c-fix"]


def test_no_shard_answering_is_unavailable_and_quick() -> None:
    async def go() -> None:
        search = FakeSearch(CHUNKS, silent=frozenset(range(4)))
        async with serving(search, shard_timeout_s=0.3) as (_, channel):
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub(channel).Query(pb.QueryRequest(question="disk"), timeout=10)
        # Quick: UNAVAILABLE at the shard timeout, not DEADLINE_EXCEEDED at the call's 10 s.
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "no retrieval shard answered within 0.30s (0 of 4)" in err.value.details()
    asyncio.run(go())


def test_client_deadline_caps_the_gather() -> None:
    async def go() -> None:
        search = FakeSearch(CHUNKS, silent=frozenset({2}))
        async with serving(search, shard_timeout_s=30) as (_, channel):
            # An answer at all (not DEADLINE_EXCEEDED) means the gather ended before 1 s.
            response = await stub(channel).Query(pb.QueryRequest(question="disk"), timeout=1.0)
        assert response.partial and list(response.missing_shards) == [2]
        assert 0.5 < search.queries[0][1] <= 0.8  # 3/4 of the 1 s deadline (wire rounding)
    asyncio.run(go())


def test_health_not_serving_until_warm_then_serving_then_not_on_shutdown() -> None:
    release = threading.Event()

    def slow_encoder() -> TextEncoder:
        release.wait(5)
        return WordEncoder()

    async def go() -> None:
        async with serving(FakeSearch(CHUNKS), slow_encoder, wait=False) as (runtime, channel):
            assert await health(channel) == NOT_SERVING
            assert await health(channel, "") == NOT_SERVING
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub(channel).Query(pb.QueryRequest(question="disk"))
            assert err.value.code() == grpc.StatusCode.UNAVAILABLE
            assert "warming up" in err.value.details()
            assert not (await stub(channel).Info(pb.InfoRequest())).ready
            release.set()
            await until_status(channel, SERVING)
            assert await health(channel, "") == SERVING
            info = await stub(channel).Info(pb.InfoRequest())
            assert (info.ready, info.model_id, info.dim, info.shards) == (True, "fake/words", 64, 4)
            watch = health_pb2_grpc.HealthStub(channel).Watch(
                health_pb2.HealthCheckRequest(service="streamrag.v1.Inference"))
            assert (await watch.read()).status == SERVING
            stopping = asyncio.ensure_future(runtime.stop())
            assert (await watch.read()).status == NOT_SERVING
            await stopping
    asyncio.run(go())


def test_reflection_lists_inference_and_health() -> None:
    async def go() -> set[str]:
        async with serving(FakeSearch(CHUNKS)) as (_, channel):
            call = reflection_pb2_grpc.ServerReflectionStub(channel).ServerReflectionInfo()
            await call.write(reflection_pb2.ServerReflectionRequest(list_services=""))
            answer = await call.read()
            await call.done_writing()
            return {s.name for s in answer.list_services_response.service}
    assert {"streamrag.v1.Inference", "grpc.health.v1.Health"} <= asyncio.run(go())


def test_dead_reply_reader_turns_not_serving_and_crashes_the_runtime() -> None:
    async def go() -> None:
        search = FakeSearch(CHUNKS)
        async with serving(search) as (runtime, channel):
            search.stopped = True  # what a reader task that died looks like from outside
            await eventually_async(lambda: runtime.crashed, "the runtime to crash", 3, 0.05)
            assert "reply reader stopped" in str(runtime.crash_reason)
            assert await health(channel) == NOT_SERVING
    asyncio.run(go())
