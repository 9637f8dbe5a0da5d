"""The sentence-vector cache: LRU order, capacity, refilling in input order."""

from __future__ import annotations

import asyncio

import numpy as np

from services.inference.answer.vector_cache import VectorCache
from shared.rpc.streamrag.v1 import inference_pb2 as pb
from tests.unit.inference.fakes import FakeSearch, WordEncoder
from tests.unit.inference.serving import CHUNKS, serving, stub


def rows(*values: float) -> np.ndarray:
    return np.array([[v, -v] for v in values], dtype=np.float32)


def test_lookup_fill_keeps_input_order_and_counts() -> None:
    cache = VectorCache(10)
    cache.store(["b"], rows(2.0))
    found, missing = cache.lookup(["a", "b", "c", "a"])
    assert missing == ["a", "c"]  # distinct, first-seen order
    out = cache.fill(["a", "b", "c", "a"], found, missing, rows(1.0, 3.0))
    assert out[:, 0].tolist() == [1.0, 2.0, 3.0, 1.0]
    assert (cache.hits, cache.misses) == (1, 2)


def test_least_recently_used_goes_first() -> None:
    cache = VectorCache(2)
    cache.store(["a", "b"], rows(1.0, 2.0))
    cache.lookup(["a"])  # a is now newer than b
    cache.store(["c"], rows(3.0))
    assert cache.lookup(["a", "b", "c"])[1] == ["b"]
    assert len(cache) == 2


def test_capacity_zero_caches_nothing() -> None:
    cache = VectorCache(0)
    cache.store(["a"], rows(1.0))
    assert cache.lookup(["a"])[1] == ["a"] and len(cache) == 0


def test_a_repeated_answer_encodes_only_the_question() -> None:
    encoder = WordEncoder()

    async def go(cache_size: int) -> list[str]:
        encoder.calls.clear()
        async with serving(FakeSearch(CHUNKS), lambda: encoder,
                           sentence_cache_size=cache_size) as (_, channel):
            first = await stub(channel).Query(pb.QueryRequest(question="What freed the disk?"))
            encoder.calls.clear()
            again = await stub(channel).Query(pb.QueryRequest(question="Who freed the disk?"))
        assert again.answer == first.answer and again.answer
        return [t for call in encoder.calls for t in call]

    assert asyncio.run(go(100)) == ["Who freed the disk?"]
    uncached = asyncio.run(go(0))
    assert uncached[0] == "Who freed the disk?" and len(uncached) > 3  # the sentences again


def test_with_a_text_retention_no_sentence_outlives_it() -> None:
    """Its keys are document sentences: stored longer ago than the retention, a sentence
    leaves at the next call, asked for or not; storing it again restarts its age."""
    now = [0.0]
    cache = VectorCache(10, ttl_s=20.0, clock=lambda: now[0])
    cache.store(["old sentence"], rows(1.0))
    now[0] = 10.0
    cache.store(["again", "newer"], rows(2.0, 3.0))
    now[0] = 15.0
    cache.store(["again"], rows(2.0))
    now[0] = 20.0
    assert cache.lookup(["newer"])[1] == []
    assert "old sentence" not in cache._rows  # gone though nobody asked for it
    now[0] = 30.0
    assert cache.lookup(["x"])[1] == ["x"]
    assert set(cache._rows) == {"again"}  # stored again at 15: kept until 35
    now[0] = 35.0
    cache.lookup([])
    assert len(cache) == 0 and cache._born == {}


def test_without_a_text_retention_only_capacity_bounds_it() -> None:
    now = [0.0]
    cache = VectorCache(2, clock=lambda: now[0])
    cache.store(["a"], rows(1.0))
    now[0] = 10.0**9
    assert cache.lookup(["a"])[1] == [] and len(cache._stored) == 0
