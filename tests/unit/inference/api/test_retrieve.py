"""Retrieve in process, over fakes: ranked chunks without an answer, Query's checks, statuses."""

from __future__ import annotations

import asyncio
import time

import grpc
import pytest

from shared.rpc.streamrag.v1 import inference_pb2 as pb
from tests.unit.inference.fakes import FakeSearch, WordEncoder
from tests.unit.inference.serving import (
    CHUNKS,
    full_encoder_queue,
    serving,
    stub,
    without_receipts,
)

QUESTION = "What freed the broker disk?"
BAD_REQUESTS = [
    (pb.RetrieveRequest(question=""), "question"),
    (pb.RetrieveRequest(question="   "), "question"),
    (pb.RetrieveRequest(question="x" * 4001), "question"),
    (pb.RetrieveRequest(question="q", top_k=-1), "top_k"),
    (pb.RetrieveRequest(question="q", top_k=51), "top_k"),
    (pb.RetrieveRequest(question="q", since="last tuesday"), "since"),
    (pb.RetrieveRequest(question="q", until="2024-01-01T00:00:00"), "until"),
    (pb.RetrieveRequest(question="q", since="1h", until="2h"), "until"),
    (pb.RetrieveRequest(question="q", domain="d" * 257), "domain"),
    (pb.RetrieveRequest(question="q", source="s" * 257), "source"),
    (pb.RetrieveRequest(question="q", deadline_ms=-1), "deadline_ms"),
]


def test_retrieve_returns_the_ranked_chunks_encoding_only_the_question() -> None:
    encoder = WordEncoder()

    async def go() -> tuple[pb.RetrieveResponse, pb.QueryResponse, list[list[str]]]:
        search = FakeSearch(CHUNKS)
        async with serving(search, factory=lambda: encoder) as (_, channel):
            before = len(encoder.calls)
            response = await stub(channel).Retrieve(pb.RetrieveRequest(
                question=QUESTION, top_k=2, since="1h", domain="ops", source="s"))
            calls = encoder.calls[before:]
            query = await stub(channel).Query(pb.QueryRequest(
                question=QUESTION, top_k=2, since="1h", domain="ops", source="s"))
        searched, timeout_s = search.queries[0]
        assert (searched.top_k, searched.domain, searched.source, searched.model_id) == (
            2, "ops", "s", "fake/words")
        assert searched.since == pytest.approx(time.time() - 3600, abs=5)
        assert searched.until is None and timeout_s == pytest.approx(2.0)
        return response, query, calls
    response, query, calls = asyncio.run(go())
    assert calls == [[QUESTION]]  # one encoder call, the question alone: no sentence encoded
    assert [c.chunk_id for c in response.chunks] == ["c-disk", "c-fix"]
    # What a Query would answer from.
    assert without_receipts(response.chunks) == without_receipts(query.citations)
    c = response.chunks[0]
    assert (c.doc_id, c.version, c.title, c.domain, c.source) == ("incident-7", 1, "t", "d", "s")
    assert c.score == pytest.approx(0.9) and c.text.startswith("Disk usage on the broker")
    assert (c.event_time, c.event_time_iso) == (1_700_000_000.0, "2023-11-14T22:13:20Z")
    assert (response.partial, list(response.missing_shards), dict(response.shard_errors)) == (
        False, [], {})
    t = response.timings
    assert t.answer_ms == 0 and t.total_ms >= t.retrieval_ms > 0 and t.embed_ms > 0


def test_top_k_zero_takes_the_servers_default() -> None:
    async def go() -> int:
        search = FakeSearch(CHUNKS)
        async with serving(search, default_top_k=2) as (_, channel):
            await stub(channel).Retrieve(pb.RetrieveRequest(question="disk"))
        return search.queries[0][0].top_k
    assert asyncio.run(go()) == 2


def test_bad_arguments_are_invalid_argument_naming_the_field() -> None:
    async def go() -> None:
        search = FakeSearch(CHUNKS)
        async with serving(search) as (_, channel):
            for request, field in BAD_REQUESTS:
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    await stub(channel).Retrieve(request)
                assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, request
                assert err.value.details().startswith(f"invalid {field} "), err.value.details()
                assert ("streamrag-field", field) in tuple(err.value.trailing_metadata())
        assert search.queries == []  # refused before any scatter
    asyncio.run(go())


def test_partial_result_names_missing_and_failed_shards() -> None:
    async def go() -> pb.RetrieveResponse:
        search = FakeSearch(CHUNKS, silent=frozenset({1, 3}), failing={0: "model_mismatch"})
        async with serving(search, shard_timeout_s=0.2) as (_, channel):
            return await stub(channel).Retrieve(pb.RetrieveRequest(question="disk"))
    response = asyncio.run(go())
    assert response.partial and list(response.missing_shards) == [0, 1, 3]
    assert dict(response.shard_errors) == {0: "model_mismatch"}
    assert [c.chunk_id for c in response.chunks] == ["c-fix"]


def test_no_shard_answering_is_unavailable() -> None:
    async def go() -> None:
        search = FakeSearch(CHUNKS, silent=frozenset(range(4)))
        async with serving(search, shard_timeout_s=0.3) as (_, channel):
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub(channel).Retrieve(pb.RetrieveRequest(question="disk"), timeout=10)
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "no retrieval shard answered within 0.30s (0 of 4)" in err.value.details()
    asyncio.run(go())


def test_deadline_ms_passing_during_the_gather_is_deadline_exceeded() -> None:
    async def go() -> None:
        search = FakeSearch(CHUNKS, silent=frozenset({2}))
        async with serving(search, shard_timeout_s=30) as (_, channel):
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub(channel).Retrieve(pb.RetrieveRequest(question="d", deadline_ms=200))
        assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert err.value.details() == "deadline_ms 200 passed"
    asyncio.run(go())


def test_bearer_token_is_required() -> None:
    async def go() -> None:
        async with serving(FakeSearch(CHUNKS), auth_token="s3cret") as (_, channel):
            request = pb.RetrieveRequest(question="disk")
            for metadata in [(), (("authorization", "Bearer wrong"),)]:
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    await stub(channel).Retrieve(request, metadata=metadata)
                assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
            response = await stub(channel).Retrieve(
                request, metadata=(("authorization", "Bearer s3cret"),))
            assert [c.chunk_id for c in response.chunks][:1] == ["c-disk"]
    asyncio.run(go())


def test_full_encoder_queue_is_resource_exhausted_and_counted_for_retrieve() -> None:
    async def go() -> tuple[grpc.aio.AioRpcError, float]:
        async with full_encoder_queue(FakeSearch(CHUNKS)) as (runtime, channel, release):
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub(channel).Retrieve(pb.RetrieveRequest(question="disk"))
            failures = runtime.metrics.sample("streamrag_inference_failures_total",
                                              {"method": "Retrieve", "reason": "queue_full"})
            await release()
            return err.value, failures
    err, failures = asyncio.run(go())
    assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "queue full: 2 requests already waiting" in err.details() and failures == 1


def test_a_repeated_question_is_not_encoded_again() -> None:
    async def go(cache_size: int) -> tuple[list[list[str]], FakeSearch]:
        encoder, search = WordEncoder(), FakeSearch(CHUNKS)
        async with serving(search, factory=lambda: encoder,
                           question_cache_size=cache_size) as (_, channel):
            encoder.calls.clear()
            await stub(channel).Retrieve(pb.RetrieveRequest(question=QUESTION))
            # Case and spacing differ; the uncased tokenizer would see the same tokens.
            await stub(channel).Retrieve(pb.RetrieveRequest(question=" what FREED the  broker "
                                                                     "disk? "))
        return encoder.calls, search

    calls, search = asyncio.run(go(16))
    assert calls == [[QUESTION]]
    first, again = (q.vector for q, _ in search.queries)
    assert first.tolist() == again.tolist()
    calls, _ = asyncio.run(go(0))
    assert len(calls) == 2  # the cache off: encoded each time
