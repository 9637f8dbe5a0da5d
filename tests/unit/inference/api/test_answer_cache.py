"""The answer cache behind the gRPC API, over fakes: Query, StreamQuery and Retrieve
share it as documented, the metrics count each outcome, and a changed hit is not served."""

from __future__ import annotations

import asyncio

from shared.rpc.streamrag.v1 import inference_pb2 as pb
from tests.unit.inference.fakes import FakeSearch, hit
from tests.unit.inference.serving import CHUNKS, serving, stub

QUESTION = "What freed the broker disk?"


def cache_count(runtime: object, call: str, outcome: str) -> float:
    return runtime.metrics.sample(  # type: ignore[attr-defined]
        "streamrag_inference_answer_cache_total", {"call": call, "outcome": outcome})


def test_a_repeated_query_reuses_its_answer_until_the_hits_change() -> None:
    async def go() -> None:
        search = FakeSearch({p: list(h) for p, h in CHUNKS.items()})
        async with serving(search) as (runtime, channel):
            s = stub(channel)
            first = await s.Query(pb.QueryRequest(question=QUESTION, top_k=2))
            again = await s.Query(pb.QueryRequest(question=QUESTION.upper(), top_k=2))
            streamed = [m async for m in s.StreamQuery(pb.QueryRequest(question=QUESTION,
                                                                      top_k=2))]
            assert again.answer == first.answer and again.timings.answer_ms == 0.0
            text = "".join(m.delta for m in streamed if m.WhichOneof("event") == "delta")
            assert text == first.answer
            assert cache_count(runtime, "query", "miss") == 1
            assert cache_count(runtime, "query", "revalidated") == 2  # FakeSearch: no generation
            # The cited chunk changes: the next answer is made from the new text.
            search.hits_by_shard[2] = [hit("c-fix", 0.8, "Deleting old segments freed the "
                                           "broker disk. Usage fell to ten percent.")]
            changed = await s.Query(pb.QueryRequest(question=QUESTION, top_k=2))
            assert "Deleting old segments" in changed.answer and changed.answer != first.answer
            assert cache_count(runtime, "query", "invalidated") == 1
            latency = runtime.metrics.sample("streamrag_inference_answer_cache_seconds_count",
                                             {"method": "Query", "outcome": "revalidated"})
            assert latency == 1
    asyncio.run(go())


def test_retrieve_keeps_its_own_entries_and_the_setting_turns_the_cache_off() -> None:
    async def go() -> None:
        async with serving(FakeSearch(CHUNKS)) as (runtime, channel):
            for _ in range(2):
                await stub(channel).Retrieve(pb.RetrieveRequest(question=QUESTION))
            assert cache_count(runtime, "retrieve", "miss") == 1
            assert cache_count(runtime, "retrieve", "revalidated") == 1
            assert cache_count(runtime, "query", "miss") == 0
        async with serving(FakeSearch(CHUNKS), answer_cache=False) as (runtime, channel):
            for _ in range(2):
                await stub(channel).Query(pb.QueryRequest(question=QUESTION))
            assert len(runtime.cache.store) == 0
            assert runtime.metrics.sample("streamrag_inference_answer_cache_seconds_count",
                                          {"method": "Query", "outcome": "off"}) == 2
    asyncio.run(go())
