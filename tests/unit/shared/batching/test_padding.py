"""Padded-token arithmetic: the batch cost and the split of a batch into forward passes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from shared.batching.padding import budget_groups, padded_tokens


def test_a_padded_pass_costs_rows_times_the_longest() -> None:
    assert padded_tokens(4, 128) == 512
    assert padded_tokens(0, 128) == 0


def test_groups_split_where_the_next_row_would_overflow() -> None:
    lengths = [10, 10, 20, 40, 300]
    assert budget_groups(range(5), lengths, 60) == [[0, 1, 2], [3], [4]]


@given(st.lists(st.integers(1, 300), min_size=1, max_size=40), st.integers(1, 1000))
def test_every_index_lands_once_in_order_and_groups_fit_unless_alone(
        lengths: list[int], budget: int) -> None:
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    groups = budget_groups(order, lengths, budget)
    assert [i for g in groups for i in g] == order
    for g in groups:
        assert len(g) == 1 or padded_tokens(len(g), max(lengths[i] for i in g)) <= budget
