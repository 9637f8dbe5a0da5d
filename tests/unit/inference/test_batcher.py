"""The dynamic batcher's rules under a fake clock: cuts, priorities, bounds, adaptive wait."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.inference.batcher import BULK, INTERACTIVE, BatchQueue, QueueFullError, WaitPolicy


def queue(max_batch: int = 4, budget: int = 100, capacity: int = 10, wait: float = 0.01,
          adaptive: bool = False) -> BatchQueue[str]:
    return BatchQueue(max_batch, budget, capacity, WaitPolicy(wait, 0.05, 0.2, adaptive))


def test_a_lone_item_waits_for_its_wait_then_goes() -> None:
    q = queue(wait=0.01)
    assert q.due() is None
    q.push("a", 5, INTERACTIVE, now=100.0)
    q.push("b", 5, INTERACTIVE, now=100.004)
    assert q.due() == pytest.approx(100.01)  # the oldest item's wait decides
    assert [i.payload for i in q.take()] == ["a", "b"] and len(q) == 0


def test_a_full_batch_is_due_at_once_and_capped_at_max_batch() -> None:
    q = queue(max_batch=3)
    for name in "abcde":
        q.push(name, 1, INTERACTIVE, now=0.0)
    assert q.due() == float("-inf")
    assert [i.payload for i in q.take()] == ["a", "b", "c"]
    assert [i.payload for i in q.take()] == ["d", "e"]


def test_token_budget_cuts_the_batch_and_keeps_order() -> None:
    q = queue(max_batch=10, budget=10)
    for name, cost in (("a", 4), ("b", 4), ("c", 4), ("d", 1)):
        q.push(name, cost, INTERACTIVE, now=0.0)
    assert q.due() == float("-inf")  # 13 tokens queued >= budget 10
    # c does not fit; d would, but skipping c would let small items starve big ones.
    assert [i.payload for i in q.take()] == ["a", "b"]


def test_an_oversized_item_still_goes_alone() -> None:
    q = queue(budget=10)
    q.push("huge", 50, INTERACTIVE, now=0.0)
    q.push("small", 1, INTERACTIVE, now=0.0)
    assert [i.payload for i in q.take()] == ["huge"]


def test_interactive_items_leave_before_earlier_bulk_ones() -> None:
    q = queue(max_batch=2)
    q.push("bulk1", 1, BULK, now=0.0)
    q.push("bulk2", 1, BULK, now=0.0)
    q.push("query", 1, INTERACTIVE, now=1.0)
    assert [i.payload for i in q.take()] == ["query", "bulk1"]


def test_a_full_queue_refuses_saying_so_and_discard_frees_a_slot() -> None:
    q = queue(capacity=2)
    first = q.push("a", 1, INTERACTIVE, now=0.0)
    q.push("b", 1, INTERACTIVE, now=0.0)
    with pytest.raises(QueueFullError, match="queue full: 2 requests already waiting"):
        q.push("c", 1, INTERACTIVE, now=0.0)
    assert q.discard(first) and not q.discard(first)
    q.push("c", 1, INTERACTIVE, now=0.0)
    assert [i.payload for i in q.take()] == ["b", "c"]


def test_adaptive_wait_grows_when_underfilled_and_halves_over_target() -> None:
    policy = WaitPolicy(wait_s=0.0, ceiling_s=0.01, target_s=0.1)
    policy.observe(size=4, max_batch=16, latency_s=0.05)
    assert policy.wait_s == pytest.approx(0.0005)  # from zero it can still grow
    for _ in range(20):
        policy.observe(size=4, max_batch=16, latency_s=0.05)
    assert policy.wait_s == pytest.approx(0.01)  # capped at the ceiling
    policy.observe(size=16, max_batch=16, latency_s=0.05)
    assert policy.wait_s == pytest.approx(0.01)  # full batches: no reason to change
    policy.observe(size=4, max_batch=16, latency_s=0.3)
    assert policy.wait_s == pytest.approx(0.005)  # over target: latency wins over fill


def test_a_lone_caller_stops_waiting() -> None:
    policy = WaitPolicy(wait_s=0.02, ceiling_s=0.02, target_s=0.1)
    policy.observe(size=1, max_batch=16, latency_s=0.01)
    assert policy.wait_s == pytest.approx(0.01)  # nobody came while it waited
    for _ in range(20):
        policy.observe(size=1, max_batch=16, latency_s=0.01)
    assert policy.wait_s < 1e-6  # one client: no wait at all, as with batch size 1
    policy.observe(size=3, max_batch=16, latency_s=0.01)
    assert policy.wait_s == pytest.approx(0.0005)  # company again: patience grows back
    single = WaitPolicy(wait_s=0.004, ceiling_s=0.02, target_s=0.1)
    single.observe(size=1, max_batch=1, latency_s=0.01)  # max batch 1 is always "full"
    assert single.wait_s == pytest.approx(0.004)


def test_fixed_policy_never_moves() -> None:
    policy = WaitPolicy(wait_s=0.004, ceiling_s=0.02, target_s=0.1, adaptive=False)
    policy.observe(1, 16, 0.01)
    policy.observe(1, 16, 9.0)
    assert policy.wait_s == 0.004


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 40), st.sampled_from([INTERACTIVE, BULK])),
                min_size=1, max_size=30),
       st.integers(1, 8), st.integers(1, 100))
def test_batches_respect_bounds_and_lose_nothing(items: list[tuple[int, int]], max_batch: int,
                                                 budget: int) -> None:
    q: BatchQueue[int] = BatchQueue(max_batch, budget, 100, WaitPolicy(0.0, 0.0, 1.0))
    for n, (cost, priority) in enumerate(items):
        q.push(n, cost, priority, now=float(n))
    seen: list[int] = []
    while len(q):
        batch = q.take()
        assert 1 <= len(batch) <= max_batch
        assert len(batch) == 1 or sum(i.cost for i in batch) <= budget
        # Within a batch, interactive before bulk, and arrival order within a priority.
        assert [(i.priority, i.seq) for i in batch] == sorted((i.priority, i.seq) for i in batch)
        seen += [i.payload for i in batch]
    assert sorted(seen) == list(range(len(items)))
