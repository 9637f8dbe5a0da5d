"""nDCG@k and Recall@k against values worked out by hand from the trec_eval definitions."""

from __future__ import annotations

import math

import pytest

from scripts.benchlib.relevance import (
    documents_by_best_chunk,
    documents_in_order,
    evaluate,
    ndcg_at,
    recall_at,
)

JUDGED = {"a": 1, "b": 2, "c": 1, "z": 0}  # z judged, not relevant


def test_ndcg_uses_linear_gain_and_the_ideal_order_of_all_judged() -> None:
    # DCG = 0 + 2/log2(3) + 1/log2(4); IDCG = 2 + 1/log2(3) + 1/log2(4)
    dcg = 2 / math.log2(3) + 0.5
    idcg = 2 + 1 / math.log2(3) + 0.5
    assert ndcg_at(["x", "b", "a", "y"], JUDGED, 10) == pytest.approx(dcg / idcg)
    assert dcg / idcg == pytest.approx(0.562727, abs=1e-6)
    assert ndcg_at(["b", "a", "c"], JUDGED, 10) == pytest.approx(1.0)
    assert ndcg_at(["a", "b", "c"], JUDGED, 10) == pytest.approx(
        (1 + 2 / math.log2(3) + 0.5) / idcg)  # grade order matters, not just membership


def test_ndcg_cuts_both_the_ranking_and_the_ideal_at_k() -> None:
    assert ndcg_at(["x", "b"], JUDGED, 1) == 0.0
    assert ndcg_at(["b", "x"], JUDGED, 1) == pytest.approx(1.0)  # ideal@1 is one grade-2 doc
    second = 1 / math.log2(3)
    assert ndcg_at(["z", "a"], JUDGED, 2) == pytest.approx(second / (2 + second))


def test_recall_counts_grades_of_one_and_more() -> None:
    assert recall_at(["x", "b", "a", "y"], JUDGED, 2) == pytest.approx(1 / 3)
    assert recall_at(["x", "b", "a", "y"], JUDGED, 10) == pytest.approx(2 / 3)
    assert recall_at(["z"], JUDGED, 10) == 0.0


def test_evaluate_averages_judged_queries_and_scores_a_lost_query_zero() -> None:
    qrels = {"q1": {"a": 1}, "q2": {"b": 1, "c": 1}, "q3": {"n": 0}}  # q3: nothing relevant
    run = {"q1": ["a", "x"], "extra": ["a"]}  # q2 lost, an unjudged query ignored
    got = evaluate(qrels, run, ks=(1, 10))
    assert got["NDCG@1"] == pytest.approx(0.5)
    assert got["Recall@10"] == pytest.approx(0.5)
    assert set(got) == {"NDCG@1", "Recall@1", "NDCG@10", "Recall@10"}


def test_documents_rank_by_their_best_chunk_not_their_chunk_count() -> None:
    hits = [("long", 0.5), ("long", 0.55), ("long", 0.52), ("short", 0.6), ("tie", 0.5),
            ("also", 0.5)]
    assert documents_by_best_chunk(hits) == ["short", "long", "also", "tie"]


def test_documents_in_order_keep_the_servers_order_not_the_scores() -> None:
    # A reranker reorders chunks but leaves `score` the search's: the order is the ranking.
    assert documents_in_order(["b", "a", "b", "c", "a"]) == ["b", "a", "c"]
    assert documents_in_order([]) == []
