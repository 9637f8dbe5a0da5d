"""Fusing dense and BM25 candidates: reciprocal rank and normalised score, by hand."""

from __future__ import annotations

import pytest

from services.inference.search.fusion import Fusion, fuse
from services.inference.search.gather import ShardAnswer, merge_hits
from shared.contract.records import SearchHit


def hit(chunk: str, score: float, lexical: float) -> SearchHit:
    return SearchHit(chunk_id=chunk, doc_id=chunk, version=1, score=score, event_time=0,
                     text="", domain="d", source="s", lexical=lexical)


HITS = [hit("A", 0.9, 0.0), hit("B", 0.8, 5.0), hit("C", 0.1, 9.0)]


def test_rrf_sums_one_over_k_plus_rank_in_each_list() -> None:
    # dense ranks A1 B2 C3; lexical ranks C1 B2 (A has no matching word: unranked)
    got = fuse(HITS, 3, Fusion("rrf", rrf_k=60))
    assert [h.chunk_id for h in got] == ["C", "B", "A"]
    assert [h.score for h in got] == pytest.approx([1 / 63 + 1 / 61, 2 / 62, 1 / 61])
    assert [h.lexical for h in got] == [9.0, 5.0, 0.0]


def test_normalised_fusion_adds_weighted_bm25_over_the_best_bm25_to_the_inner_product() -> None:
    got = fuse(HITS, 3, Fusion("normalised", dense_weight=1.0, lexical_weight=0.5))
    assert [h.chunk_id for h in got] == ["B", "A", "C"]
    assert [h.score for h in got] == pytest.approx([0.8 + 0.5 * 5 / 9, 0.9, 0.1 + 0.5])
    light = fuse(HITS, 3, Fusion("normalised", lexical_weight=0.1))
    assert [h.chunk_id for h in light] == ["A", "B", "C"]  # 0.9 > 0.8 + 0.056 > 0.1 + 0.1
    tied = [hit("A", 0.5, 0.0), hit("B", 0.5, 0.0)]  # no BM25 anywhere: the inner product
    assert [h.score for h in fuse(tied, 2, Fusion("normalised"))] == [0.5, 0.5]


def test_merge_fuses_after_keeping_one_copy_of_each_chunk() -> None:
    answers = [ShardAnswer(0, (HITS[0], HITS[1])), ShardAnswer(1, (HITS[2], HITS[1]))]
    got = merge_hits(answers, 2, Fusion("rrf", rrf_k=60))
    assert [h.chunk_id for h in got] == ["C", "B"]
    assert [h.chunk_id for h in merge_hits(answers, 2)] == ["A", "B"]  # no fusion: dense
