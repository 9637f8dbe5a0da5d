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


@given(st.lists(st.integers(1, 300), min_size=0, max_size=40), st.integers(1, 1000),
       st.integers(1, 4))
def test_parallel_passes_give_every_row_its_own_vector_in_input_order(
        lengths: list[int], budget: int, workers: int) -> None:
    """With a pool, at least `workers` passes (when there are that many rows) and the same
    rows as one pass at a time; each pass sees only rows that belong together."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    from shared.batching.padding import encode_in_groups

    texts = [f"t{i}" for i in range(len(lengths))]
    passes: list[list[str]] = []
    lock = threading.Lock()

    def forward(group: list[str]) -> np.ndarray:
        with lock:
            passes.append(group)
        return np.array([[float(t[1:]), len(group)] for t in group], dtype=np.float32)

    serial = encode_in_groups(texts, lengths, budget, 2, forward)
    serial_passes, passes[:] = list(passes), []
    with ThreadPoolExecutor(workers) as pool:
        parallel = encode_in_groups(texts, lengths, budget, 2, forward, pool, workers)
    assert list(parallel[:, 0]) == list(range(len(texts)))  # each row in its own place
    assert sorted(t for p in passes for t in p) == sorted(texts)
    assert len(passes) >= min(workers, len(texts)) and len(passes) >= len(serial_passes)
    assert list(serial[:, 0]) == list(range(len(texts)))
