"""The pure reranking order: candidates re-scored, the rest after them, ties stable, cut."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.inference.rerank.order import reorder, split


def test_candidates_are_ordered_by_score_and_the_rest_follow_unscored() -> None:
    head, rest = split(["a", "b", "c", "d", "e"], 3)
    assert (head, rest) == (("a", "b", "c"), ("d", "e"))
    out = reorder(head, [0.1, 2.0, -1.0], rest, top_k=5)
    assert out.hits == ("b", "a", "c", "d", "e")
    assert out.scores == (2.0, 0.1, -1.0, None, None)


def test_the_cut_to_top_k_comes_after_the_reorder() -> None:
    # "c" was third before the cross-encoder saw it: it must still make the top 2.
    out = reorder(("a", "b", "c"), [0.0, -3.0, 5.0], (), top_k=2)
    assert out.hits == ("c", "a") and out.scores == (5.0, 0.0)


def test_fewer_candidates_than_the_setting_are_all_reranked() -> None:
    head, rest = split(["a", "b"], 20)
    assert (head, rest) == (("a", "b"), ())
    assert reorder(head, [1.0, 3.0], rest, top_k=5).hits == ("b", "a")


def test_ties_keep_the_first_stage_order() -> None:
    out = reorder(("a", "b", "c", "d"), [1.0, 2.0, 1.0, 2.0], (), top_k=4)
    assert out.hits == ("b", "d", "a", "c")


def test_a_nan_score_ranks_last_instead_of_breaking_the_sort() -> None:
    out = reorder(("a", "b", "c"), [math.nan, -5.0, 1.0], (), top_k=3)
    assert out.hits == ("c", "b", "a")


def test_no_candidates_give_no_hits() -> None:
    head, rest = split([], 20)
    assert reorder(head, [], rest, top_k=5).hits == ()


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="candidates"):
        split(["a"], 0)
    with pytest.raises(ValueError, match="2 scores for 1 candidates"):
        reorder(("a",), [1.0, 2.0], (), top_k=1)
    with pytest.raises(ValueError, match="top_k"):
        reorder(("a",), [1.0], (), top_k=0)


@given(st.lists(st.integers(-3, 3), max_size=12), st.integers(1, 12), st.integers(1, 12))
def test_the_result_is_a_best_first_prefix_of_a_permutation(
        scores: list[int], candidates: int, top_k: int) -> None:
    hits = [f"h{i}" for i in range(len(scores))]
    head, rest = split(hits, candidates)
    out = reorder(head, [float(s) for s in scores[:len(head)]], rest, top_k)
    assert len(out.hits) == min(top_k, len(hits)) == len(out.scores)
    assert len(set(out.hits)) == len(out.hits) and set(out.hits) <= set(hits)
    shown = [s for s in out.scores if s is not None]
    assert shown == sorted(shown, reverse=True)
    # Re-scored hits all come before the rest, which keep their order.
    assert out.scores[:len(shown)] == tuple(shown)
    assert list(out.hits[len(shown):]) == list(rest[:len(out.hits) - len(shown)])
