"""Scatter-gather bookkeeping: request fan-out, merge across shards, partial results."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from services.inference.gather import Gather, SearchQuery, build_requests, merge_hits
from shared.records import SearchReply, decode_vector
from tests.unit.inference.fakes import hit


def reply(p: int, *hits: tuple[str, float], error: str = "", rid: str = "r") -> SearchReply:
    return SearchReply(request_id=rid, partition=p, error=error,
                       hits=tuple(hit(c, s) for c, s in hits))


def test_build_requests_one_per_partition() -> None:
    vec = np.arange(4, dtype=np.float32)
    query = SearchQuery(vec, "m", 4, 7, since=1.0, until=2.0, domain="d", source=None)
    reqs = build_requests(query, "abc", 4, deadline=99.0)
    assert [r.partition for r in reqs] == [0, 1, 2, 3]
    assert {(r.request_id, r.top_k, r.since, r.until, r.domain, r.deadline) for r in reqs} == {
        ("abc", 7, 1.0, 2.0, "d", 99.0)}
    assert np.array_equal(decode_vector(reqs[0].vector), vec)


def test_merge_takes_top_k_across_shards_best_score_per_chunk() -> None:
    replies = [reply(0, ("a", 0.9), ("b", 0.5)), reply(1, ("c", 0.7), ("a", 0.95)),
               reply(2, ("d", 0.7))]
    merged = merge_hits(replies, 3)
    assert [(h.chunk_id, h.score) for h in merged] == [("a", 0.95), ("c", 0.7), ("d", 0.7)]


def test_full_gather_completes_once_every_shard_answered() -> None:
    g = Gather("r", 3)
    assert not g.add(reply(0, ("a", 0.1)))
    assert not g.add(reply(0, ("z", 0.9)))  # a repeat from shard 0: first reply wins
    assert not g.add(reply(5, ("y", 0.9)))  # a shard never asked
    assert not g.add(reply(1, ("x", 0.9), rid="other"))  # another request's reply
    assert not g.add(reply(1, ("b", 0.3)))
    assert g.add(reply(2))
    result = g.result(10)
    assert [h.chunk_id for h in result.hits] == ["b", "a"]
    assert (result.answered, result.missing, result.partial) == ((0, 1, 2), (), False)


def test_partial_gather_names_missing_and_failed_shards() -> None:
    g = Gather("r", 4)
    g.add(reply(2, ("a", 0.4)))
    g.add(reply(0, error="model_mismatch"))
    result = g.result(5)
    assert result.partial and not g.complete
    assert (result.answered, result.missing) == ((2,), (1, 3))
    assert dict(result.errors) == {0: "model_mismatch"}
    assert result.unanswered == (0, 1, 3)
    assert [h.chunk_id for h in result.hits] == ["a"]


def test_nothing_answered() -> None:
    result = Gather("r", 2).result(5)
    assert (result.hits, result.answered, result.missing) == ((), (), (0, 1))


@given(st.lists(st.lists(st.tuples(st.sampled_from("abcdefgh"), st.floats(-1, 1)), max_size=5),
                min_size=1, max_size=4), st.integers(1, 10))
def test_merge_is_sorted_unique_and_bounded(shards: list[list[tuple[str, float]]],
                                            k: int) -> None:
    merged = merge_hits([reply(p, *hs) for p, hs in enumerate(shards)], k)
    scores = [h.score for h in merged]
    assert scores == sorted(scores, reverse=True)
    assert len({h.chunk_id for h in merged}) == len(merged) <= k
    every = {c for hs in shards for c, _ in hs}
    assert len(merged) == min(k, len(every))
    best = {c: max(s for hs in shards for cc, s in hs if cc == c) for c in every}
    assert all(h.score == best[h.chunk_id] for h in merged)
