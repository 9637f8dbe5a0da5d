"""Scatter-gather bookkeeping: request fan-out, merge across shards, partial results."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.inference.search.gather import Gather, ShardAnswer, merge_hits, split_reply
from services.inference.search.scatter import SearchQuery, build_requests
from shared.contract.access import Access
from shared.contract.records import QueryHits, SearchReply, decode_vector
from tests.unit.inference.fakes import hit


def reply(p: int, *hits: tuple[str, float], error: str = "") -> ShardAnswer:
    return ShardAnswer(p, tuple(hit(c, s) for c, s in hits), error)


def test_build_requests_one_per_partition_carrying_every_query() -> None:
    v1, v2 = np.arange(4, dtype=np.float32), np.ones(4, dtype=np.float32)
    q1 = SearchQuery(v1, "m", 4, 7, since=1.0, until=2.0, domain="d", source=None,
                     access=Access.of("ann", ["payments"]))
    q2 = SearchQuery(v2, "m", 4, 3, source="s", access=Access.everything())
    reqs = build_requests([("a", q1), ("b", q2)], "abc", 4, deadline=99.0)
    assert [r.partition for r in reqs] == [0, 1, 2, 3]
    assert {(r.request_id, r.model_id, r.dim, r.deadline) for r in reqs} == {
        ("abc", "m", 4, 99.0)}
    specs = reqs[2].queries
    assert [(q.query_id, q.top_k, q.since, q.until, q.domain, q.source) for q in specs] == [
        ("a", 7, 1.0, 2.0, "d", None), ("b", 3, None, None, None, "s")]
    # Each query's own access travels to every shard, sorted, all_access only when granted.
    assert {(q.query_id, q.groups, q.all_access) for r in reqs for q in r.queries} == {
        ("a", ("payments", "public", "user:ann"), False), ("b", ("public",), True)}
    assert np.array_equal(decode_vector(specs[0].vector), v1)
    assert np.array_equal(decode_vector(specs[1].vector), v2)


def test_build_requests_refuses_mixed_models() -> None:
    q1 = SearchQuery(np.ones(4, dtype=np.float32), "m", 4, 1, access=Access.everything())
    q2 = SearchQuery(np.ones(8, dtype=np.float32), "other", 8, 1, access=Access.everything())
    with pytest.raises(ValueError, match="one model"):
        build_requests([("a", q1), ("b", q2)], "r", 2, 0.0)


def test_split_reply_gives_each_query_its_hits_and_spreads_batch_errors() -> None:
    ok = SearchReply(request_id="r", partition=2, results=(
        QueryHits(query_id="a", hits=(hit("x", 0.5),)),
        QueryHits(query_id="b", error="invalid_vector")))
    parts = split_reply(ok, ["a", "b", "c"])
    assert parts["a"] == ShardAnswer(2, (hit("x", 0.5),))
    assert parts["b"] == ShardAnswer(2, (), "invalid_vector")
    assert parts["c"] == ShardAnswer(2, (), "no_result")  # left out: failed, not empty
    failed = split_reply(SearchReply(request_id="r", partition=1, error="recovering"),
                         ["a", "b"])
    assert failed == {"a": ShardAnswer(1, (), "recovering"), "b": ShardAnswer(1, (), "recovering")}


def test_merge_takes_top_k_across_shards_best_score_per_chunk() -> None:
    replies = [reply(0, ("a", 0.9), ("b", 0.5)), reply(1, ("c", 0.7), ("a", 0.95)),
               reply(2, ("d", 0.7))]
    merged = merge_hits(replies, 3)
    assert [(h.chunk_id, h.score) for h in merged] == [("a", 0.95), ("c", 0.7), ("d", 0.7)]


def test_full_gather_completes_once_every_shard_answered() -> None:
    g = Gather(3)
    assert not g.add(reply(0, ("a", 0.1)))
    assert not g.add(reply(0, ("z", 0.9)))  # a repeat from shard 0: first reply wins
    assert not g.add(reply(5, ("y", 0.9)))  # a shard never asked
    assert not g.add(reply(1, ("b", 0.3)))
    assert g.add(reply(2))
    result = g.result(10)
    assert [h.chunk_id for h in result.hits] == ["b", "a"]
    assert (result.answered, result.missing, result.partial) == ((0, 1, 2), (), False)


def test_partial_gather_names_missing_and_failed_shards() -> None:
    g = Gather(4)
    g.add(reply(2, ("a", 0.4)))
    g.add(reply(0, error="model_mismatch"))
    result = g.result(5)
    assert result.partial and not g.complete
    assert (result.answered, result.missing) == ((2,), (1, 3))
    assert dict(result.errors) == {0: "model_mismatch"}
    assert result.unanswered == (0, 1, 3)
    assert [h.chunk_id for h in result.hits] == ["a"]


def test_nothing_answered() -> None:
    result = Gather(2).result(5)
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
