"""The dynamic batching controller under a fake clock: closing rules, order, adaptation."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.embedding.batcher import BatchPolicy, DynamicBatcher, padded_tokens
from services.embedding.settings import MODES, EmbeddingSettings

POLICY = BatchPolicy(token_budget=1024, max_items=8, min_wait_s=0.01, max_wait_s=0.16,
                     latency_target_s=0.5)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def batcher(policy: BatchPolicy = POLICY) -> tuple[DynamicBatcher[str], Clock]:
    clock = Clock()
    return DynamicBatcher(policy, clock), clock


def test_a_lone_item_waits_exactly_the_current_wait() -> None:
    b, clock = batcher()
    assert b.due_in() is None
    b.add("a", 1, 100)
    assert b.due_in() == pytest.approx(0.01)
    clock.now += 0.004
    assert b.due_in() == pytest.approx(0.006)
    clock.now += 0.01
    assert b.due_in() == 0.0
    batch = b.take()
    assert batch.values == ["a"] and batch.padded_tokens == 100 and not batch.full


def test_the_padded_token_budget_closes_a_batch_at_once() -> None:
    b, _ = batcher()
    for name in "abcd":
        b.add(name, 1, 200)  # 4 x 200 = 800 padded tokens: not yet
    assert b.due_in() == pytest.approx(0.01)
    b.add("e", 2, 256)  # now 6 sequences padded to 256 = 1536 > 1024
    assert b.due_in() == 0.0
    batch = b.take()
    assert batch.values == ["a", "b", "c", "d"] and batch.full  # e would overflow the budget
    assert batch.padded_tokens == 800
    assert [i.value for i in b.pending] == ["e"]


def test_max_items_closes_too_and_an_oversized_item_goes_alone() -> None:
    b, _ = batcher()
    for i in range(9):
        b.add(str(i), 1, 10)
    assert b.due_in() == 0.0 and len(b.take().items) == 8
    b, _ = batcher()
    b.add("huge", 10, 256)  # 2,560 padded tokens on its own
    batch = b.take()
    assert batch.values == ["huge"] and batch.full and batch.padded_tokens == 2560


def test_underfilled_batches_lengthen_the_wait_up_to_the_maximum() -> None:
    b, clock = batcher()
    waits = []
    for _ in range(8):
        b.add("x", 1, 64)
        clock.now += b.wait_s
        waits.append(b.done(b.take()))
    assert waits == pytest.approx([0.015, 0.0225, 0.03375, 0.050625, 0.0759375, 0.11390625,
                                   0.16, 0.16])


def test_a_missed_latency_target_shortens_the_wait_down_to_the_minimum() -> None:
    b, clock = batcher()
    b.wait_s = 0.16
    waits = []
    for _ in range(6):
        b.add("x", 1, 64)
        clock.now += b.wait_s + 0.6  # encoding took 0.6 s: past the 0.5 s target
        waits.append(b.done(b.take()))
    assert waits == pytest.approx([0.08, 0.04, 0.02, 0.01, 0.01, 0.01])


def test_a_full_batch_on_time_leaves_the_wait_alone() -> None:
    b, clock = batcher()
    b.wait_s = 0.04
    for _ in range(4):
        b.add("x", 1, 256)
    clock.now += 0.1
    assert b.done(b.take()) == 0.04


ops = st.lists(st.one_of(
    st.tuples(st.just("add"), st.integers(1, 12), st.integers(3, 256)),
    st.tuples(st.just("tick"), st.floats(0, 0.3), st.just(0)),
    st.tuples(st.just("take"), st.just(0), st.just(0)),
), max_size=80)


@settings(max_examples=80, deadline=None)
@given(ops)
def test_batches_keep_arrival_order_fit_the_budget_and_bound_the_wait(script: list) -> None:
    b, clock = batcher()
    added, taken = [], []
    for op, x, y in script:
        if op == "add":
            added.append(str(len(added)))
            b.add(added[-1], x, y)
        elif op == "tick":
            clock.now += x
        elif b.pending and b.due_in() == 0.0:
            batch = b.take()
            assert len(batch.items) == 1 or batch.padded_tokens <= POLICY.token_budget
            assert len(batch.items) <= POLICY.max_items
            assert batch.padded_tokens == padded_tokens(batch.items)
            taken += batch.values
            assert POLICY.min_wait_s <= b.done(batch) <= POLICY.max_wait_s
    assert taken + [i.value for i in b.pending] == added


def test_settings_pick_a_mode_and_allow_batch_size_one() -> None:
    assert EmbeddingSettings().policy() == MODES["latency"]
    assert EmbeddingSettings(mode="throughput").policy() == MODES["throughput"]
    one = EmbeddingSettings(batch_max_docs=1, max_wait_s=0).policy()
    assert (one.max_items, one.min_wait_s, one.max_wait_s) == (1, 0, 0)
    b = DynamicBatcher[str](one, Clock())
    b.add("a", 1, 10)
    b.add("b", 1, 10)
    assert b.due_in() == 0.0 and b.take().values == ["a"] and b.take().values == ["b"]
