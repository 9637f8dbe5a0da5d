"""Reranking through the gRPC API in process (fake shards, a fake cross-encoder): Query,
StreamQuery and Retrieve cite the same reranked chunks, with their rerank scores."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import grpc
import pytest

from services.inference.runtime import InferenceRuntime
from services.inference.settings import InferenceSettings
from shared.rpc.streamrag.v1 import inference_pb2 as pb
from shared.settings import KafkaSettings
from tests.support.polling import eventually_async
from tests.unit.inference.fakes import FakeSearch, WordEncoder, hit
from tests.unit.inference.rerank.fakes import TableScorer, model_folder
from tests.unit.inference.serving import NOT_SERVING, SERVING, health, stub, until_status

QUESTION = "which fix freed the broker disk"
# By search score c0 > c1 > c2 > c3 > c4; by the cross-encoder c3 > c1 > c4 > c0 > c2.
SHARDS = {0: [hit("c0", 0.9, "Disk full on the broker. score=0.5"),
              hit("c3", 0.6, "Rotating the logs freed the broker disk. score=4")],
          1: [hit("c1", 0.8, "The broker disk filled overnight. score=3"),
              hit("c4", 0.5, "Usage fell to forty percent. score=1")],
          2: [hit("c2", 0.7, "Lunch was late. score=-2")]}


class Clicks:
    """Feedback: c0 clicked often enough to stay on top of the search order."""

    def counts(self, chunk_id: str) -> tuple[int, int]:
        return (10, 0) if chunk_id == "c0" else (0, 0)


async def serve(tmp_path: Path, search: FakeSearch, scorer: TableScorer | None,
                feedback: Any = None, **kw: Any) -> InferenceRuntime:
    if scorer is not None:
        kw["reranker_path"] = model_folder(tmp_path)
    settings = InferenceSettings(grpc_port=0, grace_s=0.2, **kw)
    runtime = InferenceRuntime(settings, KafkaSettings(), search=search,
                               encoder_factory=WordEncoder, reranker_factory=lambda: scorer,
                               feedback_view=feedback)
    await runtime.start()
    return runtime


def test_query_stream_query_and_retrieve_cite_the_reranked_chunks(tmp_path: Path) -> None:
    search, scorer = FakeSearch(SHARDS), TableScorer()

    async def go() -> tuple[Any, Any, list[Any], Any]:
        runtime = await serve(tmp_path, search, scorer, rerank_candidates=4)
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{runtime.port}") as channel:
                await until_status(channel, SERVING)
                s = stub(channel)
                retrieve = await s.Retrieve(pb.RetrieveRequest(question=QUESTION, top_k=3))
                query = await s.Query(pb.QueryRequest(question=QUESTION, top_k=3))
                events = [e async for e in s.StreamQuery(pb.QueryRequest(question=QUESTION,
                                                                         top_k=3))]
                info = await s.Info(pb.InfoRequest())
                return retrieve, query, events, info
        finally:
            await runtime.stop()
    retrieve, query, events, info = asyncio.run(go())
    # The search fetched the candidates, not just top_k; the fifth (c4) was never scored.
    assert {q.top_k for q, _ in search.queries} == {4}
    assert all(len(call) == 4 for call in scorer.calls if call != [("warm-up", "warm-up")])
    assert [c.chunk_id for c in retrieve.chunks] == ["c3", "c1", "c0"]
    assert [c.rerank_score for c in retrieve.chunks] == [4.0, 3.0, 0.5]
    assert [round(c.score, 6) for c in retrieve.chunks] == [0.6, 0.8, 0.9]  # search scores kept
    assert retrieve.timings.rerank_ms > 0
    start, end = events[0].start, events[-1].end
    for citations in (query.citations, start.citations):
        assert [(c.chunk_id, c.rerank_score) for c in citations] == [
            (c.chunk_id, c.rerank_score) for c in retrieve.chunks]
    assert query.timings.rerank_ms > 0 and end.timings.rerank_ms > 0
    assert (info.reranker_model, info.reranker_device, info.rerank_candidates) == (
        "fake/table", "cpu", 4)


def test_feedback_orders_the_candidates_and_the_cross_encoder_has_the_last_word(
        tmp_path: Path) -> None:
    search, scorer = FakeSearch(SHARDS), TableScorer()

    async def go() -> Any:
        runtime = await serve(tmp_path, search, scorer, Clicks(), rerank_candidates=2)
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{runtime.port}") as channel:
                await until_status(channel, SERVING)
                return await stub(channel).Retrieve(pb.RetrieveRequest(question=QUESTION,
                                                                       top_k=1))
        finally:
            await runtime.stop()
    response = asyncio.run(go())
    # Candidates: the feedback order's first two (c0 boosted, then c1); c3 would have won
    # but was not among them. c1 beats c0 by the cross-encoder.
    assert [p for _, p in scorer.calls[-1]] == ["t\nDisk full on the broker. score=0.5",
                                                "t\nThe broker disk filled overnight. score=3"]
    assert [(c.chunk_id, c.rerank_score) for c in response.chunks] == [("c1", 3.0)]


def test_without_a_reranker_no_rerank_score_is_set(tmp_path: Path) -> None:
    search = FakeSearch(SHARDS)

    async def go() -> tuple[Any, Any]:
        runtime = await serve(tmp_path, search, None)
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{runtime.port}") as channel:
                await until_status(channel, SERVING)
                s = stub(channel)
                return (await s.Retrieve(pb.RetrieveRequest(question=QUESTION, top_k=3)),
                        await s.Info(pb.InfoRequest()))
        finally:
            await runtime.stop()
    response, info = asyncio.run(go())
    assert [c.chunk_id for c in response.chunks] == ["c0", "c1", "c2"]
    assert not any(c.HasField("rerank_score") for c in response.chunks)
    assert response.timings.rerank_ms == 0 and {q.top_k for q, _ in search.queries} == {3}
    assert (info.reranker_model, info.rerank_candidates) == ("", 0)


def test_not_serving_until_the_reranker_is_loaded(tmp_path: Path) -> None:
    loaded = asyncio.Event()
    scorer = TableScorer()

    async def go() -> tuple[int, int, tuple[Any, str], Any]:
        loop = asyncio.get_running_loop()

        def factory() -> TableScorer:  # runs in a worker thread, as a real load does
            asyncio.run_coroutine_threadsafe(loaded.wait(), loop).result(5)
            return scorer
        settings = InferenceSettings(grpc_port=0, grace_s=0.2,
                                     reranker_path=model_folder(tmp_path))
        runtime = InferenceRuntime(settings, KafkaSettings(), search=FakeSearch(SHARDS),
                                   encoder_factory=WordEncoder, reranker_factory=factory)
        await runtime.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{runtime.port}") as channel:
                await eventually_async(lambda: runtime.engine.encoder is not None,
                                       "the encoder loaded")
                before = await health(channel)
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    await stub(channel).Retrieve(pb.RetrieveRequest(question=QUESTION))
                refused = (err.value.code(), err.value.details())
                loaded.set()
                await until_status(channel, SERVING)
                after = await health(channel)
                response = await stub(channel).Retrieve(pb.RetrieveRequest(question=QUESTION,
                                                                           top_k=1))
        finally:
            await runtime.stop()
        return before, after, refused, response
    before, after, refused, response = asyncio.run(go())
    assert (before, after) == (NOT_SERVING, SERVING)
    assert refused == (grpc.StatusCode.UNAVAILABLE, "warming up: the reranker is not loaded yet")
    assert [(c.chunk_id, c.rerank_score) for c in response.chunks] == [("c3", 4.0)]
