"""Fusing dense and BM25 candidates: reciprocal rank and normalised score, by hand."""

from __future__ import annotations

import pytest

from services.inference.search.fusion import Fusion, fuse
from services.inference.search.gather import ShardAnswer, merge_hits
from shared.records import SearchHit


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


def test_normalised_fusion_scales_each_list_to_0_1_and_weights_them() -> None:
    got = fuse(HITS, 3, Fusion("normalised"))
    assert [h.chunk_id for h in got] == ["B", "A", "C"]  # A and C tie at 1.0: by chunk id
    assert [h.score for h in got] == pytest.approx([0.7 / 0.8 + 5 / 9, 1.0, 1.0])
    dense_only = fuse(HITS, 2, Fusion("normalised", lexical_weight=0.0))
    assert [h.chunk_id for h in dense_only] == ["A", "B"]


def test_merge_fuses_after_keeping_one_copy_of_each_chunk() -> None:
    answers = [ShardAnswer(0, (HITS[0], HITS[1])), ShardAnswer(1, (HITS[2], HITS[1]))]
    got = merge_hits(answers, 2, Fusion("rrf", rrf_k=60))
    assert [h.chunk_id for h in got] == ["C", "B"]
    assert [h.chunk_id for h in merge_hits(answers, 2)] == ["A", "B"]  # no fusion: dense
