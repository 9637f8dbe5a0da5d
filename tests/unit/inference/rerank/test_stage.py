"""The rerank stage over a fake scorer: order, cut, batching, readiness, metrics."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np
import pytest

from services.inference.errors import NotReadyError
from services.inference.rerank.stage import RerankStage, score_batch
from services.inference.telemetry.metrics import InferenceMetrics
from shared.batching.queue import BatchLimits, QueueFullError
from shared.contract.records import SearchHit
from tests.unit.inference.fakes import hit
from tests.unit.inference.rerank.fakes import GatedScorer, TableScorer


def stage(candidates: int = 20, max_batch: int = 8,
          metrics: InferenceMetrics | None = None) -> RerankStage:
    return RerankStage(candidates, BatchLimits(100_000, max_batch), 16, 256,
                       metrics or InferenceMetrics())


def hits(*scores: float) -> list[SearchHit]:
    """First-stage hits in the given order, each passage carrying its cross-encoder score."""
    return [hit(f"c{i}", 1.0 - i / 100, f"passage {i} score={s}") for i, s in enumerate(scores)]


def test_reorders_by_the_scorer_and_cuts_to_top_k() -> None:
    asyncio.run(_reorders_by_the_scorer_and_cuts_to_top_k())


async def _reorders_by_the_scorer_and_cuts_to_top_k() -> None:
    s, scorer = stage(), TableScorer()
    s.attach(scorer)
    s.start()
    try:
        out = await s.rerank("what broke", hits(0.5, 3.0, -1.0, 2.0), top_k=3)
    finally:
        await s.stop()
    assert [h.chunk_id for h in out.hits] == ["c1", "c3", "c0"]
    assert out.scores == (3.0, 2.0, 0.5)
    # The scorer saw the question beside each passage, title first (shared.encoder.passage).
    assert scorer.calls == [[("what broke", f"t\npassage {i} score={v}")
                             for i, v in enumerate((0.5, 3.0, -1.0, 2.0))]]


def test_only_the_first_candidates_are_scored() -> None:
    asyncio.run(_only_the_first_candidates_are_scored())


async def _only_the_first_candidates_are_scored() -> None:
    s, scorer = stage(candidates=2), TableScorer()
    s.attach(scorer)
    s.start()
    try:
        out = await s.rerank("q", hits(1.0, 2.0, 9.0, 8.0), top_k=4)
    finally:
        await s.stop()
    assert len(scorer.calls[0]) == 2  # c2 and c3 would have won: never scored
    assert [h.chunk_id for h in out.hits] == ["c1", "c0", "c2", "c3"]
    assert out.scores == (2.0, 1.0, None, None)


def test_no_candidates_never_reach_the_scorer() -> None:
    asyncio.run(_no_candidates_never_reach_the_scorer())


async def _no_candidates_never_reach_the_scorer() -> None:
    s, scorer = stage(), TableScorer()
    s.attach(scorer)
    out = await s.rerank("q", [], top_k=5)  # not even started: nothing is queued
    assert (out.hits, out.scores, scorer.calls) == ((), (), [])


def test_not_ready_before_a_scorer_is_attached() -> None:
    asyncio.run(_not_ready_before_a_scorer_is_attached())


async def _not_ready_before_a_scorer_is_attached() -> None:
    s = stage()
    assert not s.ready
    with pytest.raises(NotReadyError, match="reranker"):
        await s.rerank("q", hits(1.0), top_k=1)


def test_queries_waiting_behind_a_busy_model_share_one_batch() -> None:
    asyncio.run(_queries_waiting_behind_a_busy_model_share_one_batch())


async def _queries_waiting_behind_a_busy_model_share_one_batch() -> None:
    metrics = InferenceMetrics()
    s, scorer = stage(max_batch=8, metrics=metrics), GatedScorer()
    s.attach(scorer)
    s.start()
    try:
        first = asyncio.ensure_future(s.rerank("q0", hits(1.0, 2.0), top_k=2))
        await asyncio.to_thread(scorer.entered.wait, 5)  # the model is busy with q0
        rest = [asyncio.ensure_future(s.rerank(f"q{i}", hits(float(i), -float(i)), top_k=2))
                for i in range(1, 4)]
        while len(s.batcher.queue) < 3:
            await asyncio.sleep(0.005)
        scorer.gate.set()
        outs = await asyncio.gather(first, *rest)
    finally:
        scorer.gate.set()
        await s.stop()
    assert s.batcher.batches == [1, 3]
    assert [len(c) for c in scorer.calls] == [2, 6]  # one forward call for three queries
    assert [o.scores for o in outs] == [(2.0, 1.0), (1.0, -1.0), (2.0, -2.0), (3.0, -3.0)]
    assert metrics.sample("streamrag_inference_rerank_seconds_count") == 4
    assert metrics.sample("streamrag_inference_batch_size_count", {"batcher": "rerank"}) == 2


def test_score_batch_splits_one_call_back_per_query() -> None:
    scorer = TableScorer()
    out = score_batch(scorer, [("a", ("score=1", "score=2")), ("b", ()), ("c", ("score=3",))])
    assert [o.tolist() for o in out] == [[1.0, 2.0], [], [3.0]]
    assert len(scorer.calls) == 1


def test_a_scorer_returning_the_wrong_count_is_an_error() -> None:
    class Short(TableScorer):
        def score(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
            return super().score(pairs)[:-1]
    with pytest.raises(ValueError, match="for 2 pairs"):
        score_batch(Short(), [("a", ("x", "y"))])


def test_a_full_queue_refuses_the_next_query() -> None:
    asyncio.run(_full_queue())


async def _full_queue() -> None:
    scorer = GatedScorer()
    s = RerankStage(20, BatchLimits(100_000, 1), 1, 256, InferenceMetrics())
    s.attach(scorer)
    s.start()
    try:
        running = asyncio.ensure_future(s.rerank("q0", hits(1.0), top_k=1))
        await asyncio.to_thread(scorer.entered.wait, 5)
        waiting = asyncio.ensure_future(s.rerank("q1", hits(1.0), top_k=1))
        while len(s.batcher.queue) < 1:
            await asyncio.sleep(0.005)
        with pytest.raises(QueueFullError):
            await s.rerank("q2", hits(1.0), top_k=1)
        scorer.gate.set()
        assert [len(o.hits) for o in await asyncio.gather(running, waiting)] == [1, 1]
    finally:
        scorer.gate.set()
        await s.stop()
