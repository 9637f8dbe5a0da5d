"""The queue's cut rules: two limits, priorities, FIFO, callers that left dropped."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.batching.padding import padded_tokens
from shared.batching.queue import BULK, INTERACTIVE, BatchLimits, QueueFullError, RequestQueue


def queue(max_tokens: int = 100, max_requests: int = 4, capacity: int = 10) -> RequestQueue[str]:
    return RequestQueue(BatchLimits(max_tokens, max_requests), capacity)


def test_an_empty_queue_cuts_nothing() -> None:
    cut = queue().cut(0.0)
    assert cut.batch == [] and cut.dropped == []


def test_everything_queued_goes_at_once_up_to_max_requests() -> None:
    q = queue(max_requests=3)
    for name in "abcde":
        q.push(name, 1, 1)
    assert [r.payload for r in q.cut(0.0).batch] == ["a", "b", "c"]
    assert [r.payload for r in q.cut(0.0).batch] == ["d", "e"] and len(q) == 0


def test_the_padded_token_limit_ends_the_batch_without_skipping() -> None:
    q = queue(max_tokens=100, max_requests=10)
    q.push("a", 2, 20)  # 2 x 20 = 40
    q.push("b", 1, 30)  # 3 x 30 = 90
    q.push("c", 1, 40)  # 4 x 40 = 160: over
    q.push("d", 1, 1)  # would fit, but must not overtake c
    cut = q.cut(0.0)
    assert [r.payload for r in cut.batch] == ["a", "b"] and cut.padded_tokens == 90
    assert [r.payload for r in q.cut(0.0).batch] == ["c", "d"]


def test_an_oversized_request_still_goes_alone() -> None:
    q = queue(max_tokens=10)
    q.push("huge", 4, 50)
    q.push("small", 1, 1)
    assert [r.payload for r in q.cut(0.0).batch] == ["huge"]


def test_interactive_requests_leave_before_earlier_bulk_ones() -> None:
    q = queue(max_requests=2)
    q.push("bulk1", 1, 1, BULK)
    q.push("bulk2", 1, 1, BULK)
    q.push("query", 1, 1, INTERACTIVE)
    assert [r.payload for r in q.cut(0.0).batch] == ["query", "bulk1"]


def test_pending_lists_what_a_cut_would_consider_in_its_order_and_takes_nothing() -> None:
    q = queue()
    q.push("bulk", 1, 1, BULK)
    q.push("q1", 1, 1)
    q.push("q2", 1, 1)
    assert [r.payload for r in q.pending()] == ["q1", "q2", "bulk"] and len(q) == 3
    assert [r.payload for r in q.cut(0.0).batch] == ["q1", "q2", "bulk"]


def test_callers_that_left_or_expired_are_dropped_at_the_cut() -> None:
    q = queue()
    gone = q.push("gone", 1, 1)
    q.push("late", 1, 1, deadline=5.0)
    q.push("ok", 1, 1, deadline=50.0)
    cut = q.cut(10.0, gone=lambda r: r is gone)
    assert [r.payload for r in cut.batch] == ["ok"]
    assert [r.payload for r in cut.dropped] == ["gone", "late"] and len(q) == 0


def test_a_full_queue_refuses_saying_so_and_purge_or_discard_frees_slots() -> None:
    q = queue(capacity=2)
    first = q.push("a", 1, 1)
    q.push("b", 1, 1, deadline=1.0)
    with pytest.raises(QueueFullError, match="queue full: 2 requests already waiting"):
        q.push("c", 1, 1)
    assert q.discard(first) and not q.discard(first)
    q.push("c", 1, 1)
    assert [r.payload for r in q.purge(2.0, lambda r: False)] == ["b"]
    assert [r.payload for r in q.cut(2.0).batch] == ["c"]


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        BatchLimits(0, 1)


requests = st.lists(st.tuples(st.integers(1, 6), st.integers(1, 200),
                              st.sampled_from([INTERACTIVE, BULK]), st.booleans()),
                    min_size=1, max_size=40)


@given(requests, st.integers(1, 2000), st.integers(1, 8), st.integers(1, 5))
def test_cuts_respect_both_limits_keep_fifo_and_lose_nothing(
        items: list[tuple[int, int, int, bool]], max_tokens: int, max_requests: int,
        pushes_per_cut: int) -> None:
    """Whatever arrives between cuts: a batch never exceeds either limit unless one request
    alone does; within a priority, requests run in arrival order; every request whose caller
    stayed runs exactly once; a request whose caller left never runs."""
    q: RequestQueue[int] = RequestQueue(BatchLimits(max_tokens, max_requests), 1000)
    left = {n for n, (*_, gone) in enumerate(items) if gone}
    ran: list[tuple[int, int]] = []  # (priority, payload) in run order
    dropped: list[int] = []
    pending = list(enumerate(items))
    while pending or len(q):
        for n, (sequences, longest, priority, _) in pending[:pushes_per_cut]:
            q.push(n, sequences, longest, priority)
        pending = pending[pushes_per_cut:]
        cut = q.cut(0.0, gone=lambda r: r.payload in left)
        batch = cut.batch
        assert len(batch) <= max_requests
        assert len(batch) <= 1 or cut.padded_tokens <= max_tokens
        assert cut.padded_tokens == padded_tokens(sum(r.sequences for r in batch),
                                                  max((r.longest for r in batch), default=0))
        assert not {r.payload for r in batch} & left
        ran += [(r.priority, r.payload) for r in batch]
        dropped += [r.payload for r in cut.dropped]
    assert sorted(p for _, p in ran) == sorted(set(range(len(items))) - left)
    assert sorted(dropped) == sorted(left)
    for priority in (INTERACTIVE, BULK):
        order = [p for c, p in ran if c == priority]
        assert order == sorted(order)
